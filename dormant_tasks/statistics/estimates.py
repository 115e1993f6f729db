"""The numbers of the findings, each with its uncertainty: an `Estimate` (value, 95% interval, the method that
gave it, the number of units behind it) or a `Share` (k of n heads), and the resampling settings that fix them
(`Resampling`: `--resamples`, `--seed`).

Heads come in layers and share each layer's inputs and weights, so heads are not independent: an interval over
heads resamples the layers, and the heads within each drawn layer (`cluster_bootstrap`, the two-stage bootstrap,
conservative when the layer factor is weak), its interval the expanded percentile one (`expanded_tail`: Student's
t over the layers, not the normal). Fewer than MIN_UNITS layers back no interval: the number is printed
with the reason instead. The median of per-head times gets the exact order-statistic interval
(`median_order_interval`: distribution-free, assumes exchangeable heads)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dormant_tasks.statistics.confidence import Z95, wilson_interval
from dormant_tasks.statistics.defaults import PERMUTATIONS, RESAMPLES, SEED

BOOTSTRAP = "two-stage bootstrap over layers, then heads within them, expanded percentile"
WILSON = "Wilson score interval, heads as trials"
ORDER = "exact order-statistic interval of the median (binomial ranks, heads exchangeable)"
MIN_UNITS = 5  # fewer units (layers, seeds, heads) behind a number: no interval, a warning instead
POISSON = "exact Poisson (Garwood), transitions as independent events"


@dataclass(frozen=True)
class Estimate:
    """One number of a finding: its value, its 95% interval (NaN: undefined) and the method of the interval."""

    value: float
    low: float
    high: float
    method: str
    unit: str = ""  # "tokens", "fraction", "per billion tokens", "Jaccard", ...
    n_units: int = 0  # the units the interval resamples or ranks (layers, heads, clusters, seeds, items)

    @classmethod
    def undefined(cls, method: str, unit: str = "", n_units: int = 0) -> Estimate:
        return cls(float("nan"), float("nan"), float("nan"), method, unit, n_units)

    @property
    def too_few(self) -> bool:
        """The value stands without an interval because fewer than MIN_UNITS units back it."""
        return not math.isnan(self.value) and math.isnan(self.low) and 0 < self.n_units < MIN_UNITS


@dataclass(frozen=True)
class Share:
    """k of n (heads), with its 95% interval (NaN when n = 0 or too few units): Wilson with the n as independent
    trials (`of`), or the two-stage bootstrap over layers (`share_estimate`)."""

    k: int
    n: int
    low: float
    high: float
    method: str = WILSON
    unit: str = "fraction"
    n_units: int = 0

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else float("nan")

    @property
    def too_few(self) -> bool:
        return bool(self.n) and math.isnan(self.low) and 0 < self.n_units < MIN_UNITS

    @classmethod
    def of(cls, k: int, n: int) -> Share:
        low, high = wilson_interval(k, n)
        return cls(int(k), int(n), float(low), float(high), n_units=int(n))


@dataclass(frozen=True)
class Resampling:
    """How the intervals are drawn: bootstrap resamples, permutations (input dependence), the seed."""

    resamples: int = RESAMPLES
    permutations: int = PERMUTATIONS
    seed: int = SEED

    def rng(self, stream: int) -> np.random.Generator:
        """An independent generator per statistic, so that one result does not depend on which others ran."""
        return np.random.default_rng([self.seed, stream])

    @property
    def method(self) -> str:
        return f"{BOOTSTRAP} ({self.resamples} resamples, seed {self.seed})"

    def method_over(self, units: str) -> str:
        """The name of a bootstrap over other units (seeds, clusters)."""
        return f"bootstrap over {units} ({self.resamples} resamples, seed {self.seed})"


DEFAULT_RESAMPLING = Resampling()


def poisson_interval(k: int, z: float = Z95) -> tuple[float, float]:
    """The exact (Garwood) two-sided 95% interval of a Poisson mean from one count k: the means at which
    P(X >= k) and P(X <= k) are 2.5%. By bisection on the Poisson CDF, summed in log space (no scipy)."""
    alpha = math.erfc(z / math.sqrt(2)) / 2  # 0.025 for z = 1.96

    def cdf(x: int, lam: float) -> float:  # P(X <= x)
        if x < 0:
            return 0.0
        if lam == 0:
            return 1.0
        log_lam = math.log(lam)
        return math.fsum(math.exp(-lam + i * log_lam - math.lgamma(i + 1)) for i in range(x + 1))

    def bisect(below, hi: float) -> float:  # the root of a condition true below it and false above
        lo = 0.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if below(mid) else (lo, mid)
        return (lo + hi) / 2

    top = k + 20.0 * math.sqrt(k + 1) + 20.0
    upper = bisect(lambda lam: cdf(k, lam) > alpha, top)  # P(X <= k) falls as the mean grows
    lower = 0.0 if k == 0 else bisect(lambda lam: 1.0 - cdf(k - 1, lam) < alpha, top)  # P(X >= k) grows
    return lower, upper


def bootstrap_interval(stats: np.ndarray, units: int | None = None) -> tuple[float, float]:
    """The 2.5% and 97.5% percentiles of bootstrap statistics (NaN ones left out; NaN when none is left); with
    `units` (the number of independent units resampled), the expanded percentile interval (`expanded_tail`)."""
    stats = np.asarray(stats, dtype=np.float64)
    stats = stats[~np.isnan(stats)]
    if not stats.size:
        return float("nan"), float("nan")
    tail = 0.025 if units is None else expanded_tail(units)
    low, high = np.percentile(stats, [100 * tail, 100 * (1 - tail)])
    return float(low), float(high)


def expanded_tail(units: int, alpha: float = 0.05) -> float:
    """The tail share of the expanded percentile interval (Hesterberg 2015) over `units` resampled units:
    Phi(-sqrt(n / (n - 1)) t_{1 - alpha/2, n - 1}). The plain percentile interval is too narrow with few units
    (the bootstrap's variance is the plug-in one, short by (n - 1) / n, and its tails are normal where Student's
    t with n - 1 degrees of freedom is due): with 16 layers it covered 0.89-0.92 of nominal 0.95
    (benchmarks/findings_calibration.py). Expanded, the interval of a mean over n units is Student's t interval
    (0.0139 per tail at n = 16, 0.0197 at n = 64, 0.025 as n grows)."""
    from scipy import special, stats

    if units < 2:
        return alpha / 2
    quantile = stats.t.ppf(1 - alpha / 2, units - 1)
    return float(special.ndtr(-math.sqrt(units / (units - 1)) * quantile))


def resample_heads(n_heads: int, resampling: Resampling, stream: int) -> np.ndarray:
    """int64 [resample, head]: for each bootstrap resample, n_heads heads drawn with replacement (heads as
    independent units: used where no layer is known)."""
    return resampling.rng(stream).integers(0, n_heads, size=(resampling.resamples, n_heads))


def cluster_bootstrap(layer: np.ndarray, resampling: Resampling, stream: int) -> list[np.ndarray]:
    """Per bootstrap resample, int64 indices into the heads: the layers drawn with replacement (as many as there
    are), then within each drawn layer its heads drawn with replacement. layer: [head] each head's layer.
    Drawn for all resamples at once (a position j of a drawn layer of m heads takes its floor(u_j m)-th head)."""
    layer = np.asarray(layer)
    _, group = np.unique(layer, return_inverse=True)
    order = np.argsort(group, kind="stable")  # the heads layer by layer
    sizes = np.bincount(group)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rng = resampling.rng(stream)
    picked = rng.integers(0, sizes.size, size=(resampling.resamples, sizes.size))  # [resample, drawn layer]
    m = sizes[picked][..., None]
    u = rng.random((*picked.shape, int(sizes.max(initial=0))))  # [resample, drawn layer, position]
    idx = order[starts[picked][..., None] + np.minimum((u * m).astype(np.int64), m - 1)]
    if (sizes == sizes[0]).all():  # every layer as large: no position to drop
        return list(idx.reshape(resampling.resamples, -1))
    keep = np.arange(u.shape[-1]) < m
    return [idx[r][keep[r]] for r in range(resampling.resamples)]


def n_layers(layer: np.ndarray) -> int:
    return int(np.unique(np.asarray(layer)).size)


def layered_estimate(
    statistic, values: np.ndarray, layer: np.ndarray, resampling: Resampling, stream: int, unit: str
) -> Estimate:
    """statistic(values) with the expanded percentile interval (`expanded_tail`, the layers as the units) of the
    two-stage bootstrap over layers (`cluster_bootstrap`);
    the value alone, with n_units = the layers, when fewer than MIN_UNITS layers back it. values: [head, ...]."""
    values = np.asarray(values, dtype=np.float64)
    units = n_layers(layer)
    if not values.shape[0]:
        return Estimate.undefined(resampling.method, unit, 0)
    value = float(statistic(values))
    if units < MIN_UNITS:
        return Estimate(value, float("nan"), float("nan"), resampling.method, unit, units)
    stats = np.array([statistic(values[idx]) for idx in cluster_bootstrap(layer, resampling, stream)])
    return Estimate(value, *bootstrap_interval(stats, units), resampling.method, unit, units)


def share_estimate(hit: np.ndarray, layer: np.ndarray, resampling: Resampling, stream: int) -> Share:
    """The share of heads with `hit` (bool [head]) and its two-stage bootstrap interval over layers."""
    hit = np.asarray(hit, dtype=bool)
    e = layered_estimate(np.mean, hit.astype(np.float64), layer, resampling, stream, "fraction")
    return Share(int(hit.sum()), int(hit.size), e.low, e.high, e.method, "fraction", e.n_units)


def median_order_interval(values: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The exact distribution-free (1 - alpha) interval of a median from order statistics: (x_(l), x_(n+1-l)),
    l the largest rank with 2 P(Binomial(n, 1/2) <= l - 1) <= alpha; its coverage is at least 1 - alpha for
    exchangeable continuous values. Values may be +inf (right-censored at the series' end: the upper end is then
    "not reached"). (nan, nan) when n is too small for the level (n < 6 at 95%)."""
    from scipy import stats

    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if not n:
        return float("nan"), float("nan")
    ranks = np.arange(1, n // 2 + 1)  # candidate l
    ok = ranks[2 * stats.binom.cdf(ranks - 1, n, 0.5) <= alpha]
    if not ok.size:
        return float("nan"), float("nan")
    rank = int(ok.max())
    return float(x[rank - 1]), float(x[n - rank])


def lower_median(values: np.ndarray) -> float:
    """The smallest value with at least half of the values at or below it: with values right-censored at one
    time (+inf), the Kaplan-Meier median (the first time the share not yet reached falls to 1/2 or below)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    return float(x[(x.size + 1) // 2 - 1])


def median_estimate(values: np.ndarray, layer: np.ndarray, resampling: Resampling, stream: int, unit: str) -> Estimate:
    """The (lower) median of per-head values with the two-stage bootstrap interval over layers
    (`layered_estimate`): the order-statistic interval assumes exchangeable heads and covers about half the time
    when heads share a layer factor (benchmarks/findings_calibration.py), so it is kept for exchangeable units.
    +inf values are right-censored: the median is +inf ("not reached") when more than half are, and so is an
    interval end. Every resample's median is one of the values, so an end beyond the last observed time can only
    come from the percentile interpolating between it and a censored median: that end is "not reached" too, never
    a time past the series' end."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    last = float(finite.max()) if finite.size else 0.0
    big = (last + 1.0) * 2.0  # +inf stand-in for the bootstrap (the percentiles interpolate)
    e = layered_estimate(lower_median, np.where(np.isinf(values), big, values), layer, resampling, stream, unit)

    def back(x: float) -> float:
        return float("inf") if x > last else x

    return Estimate(back(e.value), back(e.low), back(e.high), e.method, unit, e.n_units)


def rate_estimate(per_head: np.ndarray, layer: np.ndarray, tokens: int, resampling: Resampling) -> Estimate:
    """Events per billion tokens from per-head counts (int [head], each head's whole history), with the two-stage
    bootstrap interval over layers: clustered events (a head that changes often, the heads of one layer that
    change together) stay together in a resample, which a Poisson interval on the total count ignores."""
    scale = 1e9 / tokens if tokens > 0 else float("nan")
    e = layered_estimate(np.sum, np.asarray(per_head, dtype=np.float64), layer, resampling, 20, "per billion tokens")
    return Estimate(e.value * scale, e.low * scale, e.high * scale, e.method, e.unit, e.n_units)


def scaled(e: Estimate, factor: float, unit: str) -> Estimate:
    return Estimate(e.value * factor, e.low * factor, e.high * factor, e.method, unit, e.n_units)
