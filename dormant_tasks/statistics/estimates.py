"""The numbers of the findings, each with its uncertainty: an `Estimate` (value, 95% interval, the method that
gave it: a bootstrap over heads, exact Poisson) or a Wilson `Share`, and the resampling settings that fix them
(`Resampling`: `--resamples`, `--seed`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dormant_tasks.statistics.confidence import Z95, wilson_interval
from dormant_tasks.statistics.defaults import PERMUTATIONS, REPEATS, RESAMPLES, SEED

BOOTSTRAP = "bootstrap over heads"
WILSON = "Wilson score interval, heads as trials"
POISSON = "exact Poisson (Garwood), transitions as independent events"


@dataclass(frozen=True)
class Estimate:
    """One number of a finding: its value, its 95% interval (NaN: undefined) and the method of the interval."""

    value: float
    low: float
    high: float
    method: str
    unit: str = ""  # "tokens", "fraction", "per billion tokens", "Jaccard", ...
    n_units: int = 0

    @classmethod
    def undefined(cls, method: str, unit: str = "") -> Estimate:
        return cls(float("nan"), float("nan"), float("nan"), method, unit)


@dataclass(frozen=True)
class Share:
    """k of n, with its 95% Wilson interval (NaN when n = 0)."""

    k: int
    n: int
    low: float
    high: float
    method: str = WILSON
    unit: str = "fraction"

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else float("nan")

    @classmethod
    def of(cls, k: int, n: int) -> Share:
        low, high = wilson_interval(k, n)
        return cls(int(k), int(n), float(low), float(high))


@dataclass(frozen=True)
class Resampling:
    """How the intervals over heads are drawn: bootstrap resamples, permutations, random halves, the seed."""

    resamples: int = RESAMPLES
    permutations: int = PERMUTATIONS
    repeats: int = REPEATS
    seed: int = SEED

    def rng(self, stream: int) -> np.random.Generator:
        """An independent generator per statistic, so that one result does not depend on which others ran."""
        return np.random.default_rng([self.seed, stream])

    @property
    def method(self) -> str:
        return f"{BOOTSTRAP} ({self.resamples} resamples, seed {self.seed})"


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


def bootstrap_interval(stats: np.ndarray) -> tuple[float, float]:
    """The 2.5% and 97.5% percentiles of bootstrap statistics (NaN ones left out; NaN when none is left)."""
    stats = np.asarray(stats, dtype=np.float64)
    stats = stats[~np.isnan(stats)]
    if not stats.size:
        return float("nan"), float("nan")
    low, high = np.percentile(stats, [2.5, 97.5])
    return float(low), float(high)


def resample_heads(n_heads: int, resampling: Resampling, stream: int) -> np.ndarray:
    """int64 [resample, head]: for each bootstrap resample, n_heads heads drawn with replacement."""
    return resampling.rng(stream).integers(0, n_heads, size=(resampling.resamples, n_heads))


def median_estimate(values: np.ndarray, resampling: Resampling, stream: int, unit: str) -> Estimate:
    """The median of per-head values with a percentile bootstrap interval over the heads."""
    values = np.asarray(values, dtype=np.float64)
    if not values.size:
        return Estimate.undefined(resampling.method, unit)
    medians = np.median(values[resample_heads(values.size, resampling, stream)], axis=1)  # [resample]
    return Estimate(float(np.median(values)), *bootstrap_interval(medians), resampling.method, unit)


def rate_estimate(per_head: np.ndarray, tokens: int, resampling: Resampling = DEFAULT_RESAMPLING) -> Estimate:
    """Events per billion tokens from per-head counts (int [head], each head's whole history), with a
    percentile bootstrap interval over the heads: clustered events (a head that changes often, blips in
    pairs) stay together in a resample, which a Poisson interval on the total count ignores."""
    per_head = np.asarray(per_head, dtype=np.float64)
    scale = 1e9 / tokens if tokens > 0 else float("nan")
    totals = per_head[resample_heads(per_head.size, resampling, 20)].sum(axis=1) if per_head.size else np.zeros(1)
    return Estimate(
        float(per_head.sum()) * scale, *bootstrap_interval(totals * scale), resampling.method, "per billion tokens"
    )


def scaled(e: Estimate, factor: float, unit: str) -> Estimate:
    return Estimate(e.value * factor, e.low * factor, e.high * factor, e.method, unit)
