"""The paper's three training-dynamics findings, measured on a tracked series (docs/SCORES.md §7, "Findings").

Dormant heads (1) **emerge early** in pretraining, (2) **transition** between dormant and active states
during it, and (3) **depend on the input text**. Each is stated here with its number and its uncertainty,
from the store only (`SeriesView`): the head states of head_scores, the stored transitions (with their
`confident_q` and `blip`), the calibration sets' agreement and the per-input inactive indicators
(`head_scores.inactive_inputs`). `dormant findings` prints them and the report shows them (the text and
figures: `reporting/texts.py`, `findings_lines`); the counts are the ones `dormant status` gives.

Every number is an `Estimate` (value, 95% interval, the method's name) or a `Share` (k of n heads, Wilson).
Intervals over heads resample the heads: they say how the number would vary over other heads like these, of
this one model; the heads of a model are not independent trials, and nothing here speaks for other models.

- Emergence: per head dormant at the last checkpoint, the first checkpoint at which it is dormant and the
  first from which it is dormant at >= STABLE of the checkpoints to the end (robust to a late blip); their
  medians with bootstrap intervals over heads, in tokens and as fractions of the series' tokens; and the
  share settled (the robust rule) by EARLY of the tokens (Wilson).
- Transitions: confident ones (Benjamini-Hochberg q < fdr); per training stage, confident ones per billion
  tokens with a bootstrap interval over heads (each head's whole history resampled; the exact Poisson
  interval beside it for comparison), and the cadence-free measures: heads that ever change state, heads
  that change more than once (Wilson), each interval's changes with its checkpoint spacing.
- Input dependence: the Jaccard agreement of the sets' masks through training (`calibration_agreement`),
  and at the last shared checkpoint the noise floor: across-set minus within-set agreement of random
  halves, with a bootstrap interval over heads and a permutation test over set labels (`noise_floor`).

Token counts along a series: a checkpoint's tokens, plus, after a stage boundary whose names restart the
count (OLMo-2's stage-2 ingredients count their own tokens), the tokens of the branch point (`path_tokens`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.errors import StoreError
from dormant_tasks.tracking.confidence import Z95, unpack_inputs, wilson_interval
from dormant_tasks.tracking.defaults import FDR, PERMUTATIONS, REPEATS, RESAMPLES, SEED
from dormant_tasks.tracking.transitions import confident_at

EARLY = 0.10  # "early": by this fraction of the series' tokens
STABLE = 0.80  # "settled": dormant at >= this fraction of the checkpoints from then to the last
DEFAULT_FN = "ahon_ln"  # the v1 "dormant head" rule, as `dormant status` summarises

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


@dataclass(frozen=True)
class Emergence:
    n_heads: int
    final_revision: str
    final_tokens: int  # along the path (`path_tokens`)
    pct_dormant_first: float  # % of heads dormant at the first checkpoint (as `dormant status`)
    pct_dormant_last: float  # ... at the last
    first_dormant_revision: str | None  # the first checkpoint with any dormant head
    first_dormant_tokens: int | None
    heads: list[str]  # "L{layer}.H{head}" of the heads dormant at the last checkpoint
    first_tokens: np.ndarray  # int64 [final-dormant head]: tokens at its first dormant checkpoint on the path
    settled_tokens: np.ndarray  # int64 [final-dormant head]: tokens from which it is dormant at >= STABLE
    settled_revisions: list[str]  # [final-dormant head]
    stable: float  # STABLE
    first_median: Estimate  # median of first_tokens (tokens), bootstrap over heads
    settled_median: Estimate  # median of settled_tokens (tokens)
    first_fraction: Estimate  # first_median / final_tokens (fraction of the series' tokens)
    settled_fraction: Estimate
    early_tokens: float  # EARLY x final_tokens
    early: Share  # of the final-dormant heads, those settled by early_tokens


@dataclass(frozen=True)
class StageRate:
    stage: int
    n_transitions: int
    n_confident: int
    tokens: int  # tokens the stage's compared pairs span (along each pair's path)
    spacing: Estimate  # median tokens between compared checkpoints of the stage (min-max as its "interval")
    per_billion: Estimate  # confident transitions per 1e9 tokens, bootstrap over heads (NaN when tokens = 0)
    poisson: Estimate  # the same rate with the exact Poisson interval (too narrow when transitions cluster)


@dataclass(frozen=True)
class Transitions:
    n_transitions: int
    fell_dormant: int
    woke: int
    n_confident: int
    n_blips: int
    fdr: float  # the false discovery rate of "confident"
    correction: str  # how "confident" was decided
    n_tests: int  # the family of the paired tests: heads x compared pairs
    n_paired: int  # transitions with a p-value (the others use the interval fallback)
    n_raw: int  # transitions with p < fdr, uncorrected (for comparison)
    stages: list[StageRate]
    ever_changed: Share  # heads (of all) that changed state at least once
    more_than_once: Share  # heads (of all) that changed state more than once
    confidently_more_than_once: int  # heads with two or more confident transitions
    interval_tokens: np.ndarray  # int64 [interval]: tokens at the later checkpoint of each compared pair
    interval_spacing: np.ndarray  # int64 [interval]: tokens between the pair's checkpoints
    interval_steps: np.ndarray  # int64 [interval]: steps between them
    interval_confident: np.ndarray  # int64 [interval]: confident transitions into it
    interval_other: np.ndarray  # int64 [interval]: the others


@dataclass(frozen=True)
class NoiseFloor:
    """Across-set vs within-set agreement of random halves at one checkpoint (`noise_floor`)."""

    revision: str
    n_inputs: int  # inputs in each half (the same for every comparison)
    within: Estimate  # Jaccard of two halves of one set, pooled over sets and splits
    across: Estimate  # Jaccard of a half of one set and a half of another, pooled over pairs and splits
    difference: Estimate  # across - within (negative: the sets' masks differ more than halves of one set)
    p_value: float  # one-sided permutation test of "across is lower than within", set labels permuted
    permutations: int
    repeats: int


@dataclass(frozen=True)
class InputDependence:
    calibration_ids: list[str]  # the series' sets, the primary first
    revisions: list[str] = field(default_factory=list)  # checkpoints scored on >= 2 sets, series order
    tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [checkpoint], along the path
    jaccard: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [checkpoint] pooled over pairs (NaN: undefined)
    pairs: dict = field(default_factory=dict)  # (set a, set b) -> float64 [checkpoint] Jaccard (NaN: undefined)
    first: tuple[str, float] | None = None  # the first checkpoint where the Jaccard is defined, and its value
    last: Estimate | None = None  # pooled Jaccard at the last shared checkpoint, bootstrap over heads
    all_of_any: Share | None = None  # heads dormant on every set, of those dormant on any, at the last one
    noise_floor: NoiseFloor | None = None  # at the last shared checkpoint
    noise_floor_note: str = ""  # why there is no noise floor, when there is none

    @property
    def measured(self) -> bool:
        return len(self.calibration_ids) >= 2 and bool(self.revisions)


@dataclass(frozen=True)
class Findings:
    model_id: str
    score_fn: str
    calibration_id: str
    tau: float
    direction: str
    n_checkpoints: int
    emergence: Emergence
    transitions: Transitions
    input_dependence: InputDependence
    resampling: Resampling = DEFAULT_RESAMPLING


# ------------------------------------------------------------------------------------------ pieces


def path_tokens(tokens: np.ndarray, stage: np.ndarray, predecessor: np.ndarray) -> np.ndarray:
    """int64 [checkpoint]: training tokens seen, counted along each checkpoint's path from the first one.

    A checkpoint adds its token difference to its predecessor's count; when its own count is smaller (a new
    stage whose names count from 0, e.g. a stage-2 ingredient after stage 1), it adds its own count instead;
    a checkpoint without a token count (`main`, -1) adds nothing. Checkpoints in series order.
    """
    out = np.asarray(tokens, dtype=np.int64).copy()
    for c in range(len(out)):
        p = predecessor[c]
        if p < 0:
            out[c] = max(int(tokens[c]), 0)
        elif tokens[c] < 0:
            out[c] = out[p]
        elif tokens[c] >= tokens[p]:
            out[c] = out[p] + int(tokens[c] - tokens[p])
        else:
            out[c] = out[p] + int(tokens[c])
    return out


def path_to(last: int, predecessor: np.ndarray) -> np.ndarray:
    """int64 [checkpoint on the path]: the checkpoints from the first one to `last`, following predecessors."""
    path = [last]
    while predecessor[path[-1]] >= 0:
        path.append(int(predecessor[path[-1]]))
    return np.array(path[::-1], dtype=np.int64)


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


def stable_index(dormant_on_path: np.ndarray, stable: float = STABLE) -> np.ndarray:
    """int64 [head]: the first position on the path at which the head is dormant and from which it is dormant
    at >= `stable` of the positions to the end (that one included); -1 when it is not dormant at the end.
    `stable` = 1: dormant for good from there. dormant_on_path: bool [position, head]."""
    d = np.asarray(dormant_on_path, dtype=bool)
    n = d.shape[0]
    after = np.flip(np.cumsum(np.flip(d, axis=0), axis=0), axis=0)  # [position, head] dormant from p to the end
    left = (n - np.arange(n))[:, None]  # [position, 1] positions from p to the end
    ok = d & (after >= stable * left - 1e-9)  # [position, head]
    first = np.where(ok.any(axis=0), ok.argmax(axis=0), -1)
    return np.where(d[n - 1], first, -1).astype(np.int64)


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


def noise_floor(sets: list[np.ndarray], resampling: Resampling = DEFAULT_RESAMPLING, revision: str = "") -> NoiseFloor:
    """Across-set vs within-set agreement of one checkpoint's masks, at equal size (docs/SCORES.md §7).

    sets: per calibration set, bool [input, head] per-input inactive indicators (the same heads, in the same
    order). Each of `repeats` times, every set is split at random into two halves of h inputs (h: half the
    smallest set); a half's mask is dormant_rate >= 0.5 over its h inputs. Within: Jaccard of a set's two
    halves; across: of the first (and of the second) halves of two sets. Each is pooled over sets (pairs) and
    repeats as sum |A n B| / sum |A u B|, with a bootstrap interval over heads (a head's counts over every split
    stay together). The difference across - within gets a one-sided permutation p-value: the inputs of all
    sets pooled, set labels permuted (sizes kept), the difference recomputed with the same number of splits;
    and a 95% interval that holds both sources of noise, the heads (the bootstrap's spread of the difference)
    and the inputs (the permutation distribution's spread): difference +- 1.96 sqrt(sd_heads² + sd_inputs²).
    A bootstrap over heads alone leaves out which inputs each set happened to draw, and two sets of the same
    text then differ by more than it allows.
    """
    sets = [np.asarray(x, dtype=bool) for x in sets]
    if len(sets) < 2:
        raise ValueError("the noise floor compares two calibration sets or more")
    h = min(x.shape[0] for x in sets) // 2
    if h < 1 or not sets[0].shape[1]:
        raise ValueError("each calibration set needs two inputs or more to be split in halves, and a head")
    sizes = [x.shape[0] for x in sets]
    pooled = np.concatenate(sets)  # [input of every set, head]
    starts = np.concatenate([[0], np.cumsum(sizes)])

    def counts(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """float64 [4, head]: within both, within union, across both, across union, summed over the splits.
        labels: [input] the pooled inputs in set order (a permutation of np.arange)."""
        halves = []  # per set, bool [split, half, head]: the masks of its two halves in each split
        for k in range(len(sets)):
            own = np.tile(labels[starts[k] : starts[k + 1]], (resampling.repeats, 1))  # [split, input]
            pick = rng.permuted(own, axis=1)[:, : 2 * h].reshape(resampling.repeats, 2, h)  # [split, half, input]
            halves.append(pooled[pick].sum(axis=2) >= h / 2)  # rate >= 0.5 over the half's h inputs
        out = np.zeros((4, pooled.shape[1]))
        for m in halves:
            out[0] += (m[:, 0] & m[:, 1]).sum(axis=0)
            out[1] += (m[:, 0] | m[:, 1]).sum(axis=0)
        for a in range(len(sets)):
            for b in range(a + 1, len(sets)):
                out[2] += (halves[a] & halves[b]).sum(axis=(0, 1))
                out[3] += (halves[a] | halves[b]).sum(axis=(0, 1))
        return out

    def jaccards(c: np.ndarray) -> tuple[float, float]:
        with np.errstate(invalid="ignore", divide="ignore"):
            return c[0].sum() / c[1].sum(), c[2].sum() / c[3].sum()  # NaN when no half marks a head

    observed = counts(np.arange(pooled.shape[0]), resampling.rng(30))  # [4, head]
    within, across = jaccards(observed)
    idx = resample_heads(pooled.shape[1], resampling, 31)  # [resample, head]
    sums = observed[:, idx].sum(axis=2)  # [4, resample]
    with np.errstate(invalid="ignore", divide="ignore"):
        w_b, a_b = sums[0] / sums[1], sums[2] / sums[3]  # [resample]
    rng = resampling.rng(32)
    null = np.array(
        [
            np.subtract(*jaccards(counts(rng.permutation(pooled.shape[0]), rng))[::-1])
            for _ in range(resampling.permutations)
        ]
    )
    diff = across - within
    valid = null[~np.isnan(null)]
    p = float((1 + (valid <= diff).sum()) / (1 + valid.size)) if not math.isnan(diff) else float("nan")
    d_b = (a_b - w_b)[~np.isnan(a_b - w_b)]
    se = math.sqrt((d_b.var() if d_b.size > 1 else 0.0) + (valid.var() if valid.size > 1 else 0.0))
    method = resampling.method
    both_noises = (
        f"normal, heads and inputs: bootstrap over heads ({resampling.resamples} resamples) and permutations of "
        f"the set labels ({resampling.permutations}), seed {resampling.seed}"
    )
    return NoiseFloor(
        revision,
        h,
        Estimate(float(within), *bootstrap_interval(w_b), method, "Jaccard"),
        Estimate(float(across), *bootstrap_interval(a_b), method, "Jaccard"),
        # clipped: a difference of two Jaccard indices lies in [-1, 1]
        Estimate(
            float(diff), float(max(-1.0, diff - Z95 * se)), float(min(1.0, diff + Z95 * se)), both_noises, "Jaccard"
        ),
        p,
        resampling.permutations,
        resampling.repeats,
    )


# ------------------------------------------------------------------------------------------ the findings


def series_findings(
    store, model_id: str, score_fn: str | None = None, fdr: float = FDR, resampling: Resampling = DEFAULT_RESAMPLING
) -> Findings:
    """The three findings of `model_id` on its primary calibration set under `score_fn` (default ahon_ln when
    tracked, else the first tracked function); a transition is confident when its q-value is below `fdr`;
    reads the store only."""
    from dormant_tasks.tracking.series import SeriesView, open_views

    if not 0 < fdr < 1:
        from dormant_tasks.errors import ConfigError

        raise ConfigError(f"--fdr {fdr}: a false discovery rate lies between 0 and 1 (e.g. 0.05)")
    if resampling.resamples < 1 or resampling.permutations < 1 or resampling.repeats < 1:
        from dormant_tasks.errors import ConfigError

        raise ConfigError(f"--resamples {resampling.resamples}: give a positive number (e.g. {RESAMPLES})")
    views = open_views(store, model_id)
    if not views:
        SeriesView.open(store, model_id)  # the StoreError that names what the store holds
    view = views[0]
    fn = score_fn or (DEFAULT_FN if DEFAULT_FN in view.taus else next(iter(view.taus)))
    if fn not in view.taus:
        from dormant_tasks.engine.score_functions import get_score_function

        get_score_function(fn)  # an unknown id: ConfigError with did-you-mean
        raise StoreError(f"{model_id}: {fn} is not tracked; choose from: {', '.join(view.taus)}")
    states = list(view.states([fn]))
    if not states:
        raise StoreError(f"{model_id}: no {fn} head_scores under the current taus; run `dormant track` for it")
    s = states[0]
    tokens = path_tokens(s.tokens, s.stage, s.predecessor)  # [checkpoint]
    transitions = view.transitions([fn])
    return Findings(
        model_id,
        fn,
        view.calibration_id,
        view.taus[fn].value,
        view.taus[fn].direction,
        len(s.revision),
        emergence(s, tokens, resampling),
        transition_findings(s, tokens, transitions, fdr, resampling),
        input_dependence(views, fn, s, tokens, resampling),
        resampling,
    )


def emergence(s, tokens: np.ndarray, resampling: Resampling = DEFAULT_RESAMPLING, stable: float = STABLE) -> Emergence:
    """Finding 1 from a `SeriesStates` and its `path_tokens`."""
    n_ckpt, n_heads = s.dormant.shape
    last = n_ckpt - 1
    path = path_to(last, s.predecessor)  # [position]
    on_path = s.dormant[path]  # [position, head]
    settled = stable_index(on_path, stable)  # [head]
    final = np.flatnonzero(settled >= 0)  # [final-dormant head]
    first_at = path[on_path[:, final].argmax(axis=0)] if final.size else np.zeros(0, np.int64)  # [final head]
    at = path[settled[final]]  # [final-dormant head] checkpoint index
    first_tokens, settled_tokens = tokens[first_at].astype(np.int64), tokens[at].astype(np.int64)
    total = float(tokens[last])
    early_tokens = EARLY * total
    any_dormant = np.flatnonzero(s.dormant.any(axis=1))  # [checkpoint]
    first = int(any_dormant[0]) if any_dormant.size else None
    labels = [f"L{s.layer[h]}.H{s.head_index[h]}" for h in final]
    first_median = median_estimate(first_tokens, resampling, 10, "tokens")
    settled_median = median_estimate(settled_tokens, resampling, 11, "tokens")
    per_total = 1.0 / total if total > 0 else float("nan")
    return Emergence(
        n_heads,
        str(s.revision[last]),
        int(tokens[last]),
        100.0 * float(s.dormant[0].mean()),
        100.0 * float(s.dormant[last].mean()),
        None if first is None else str(s.revision[first]),
        None if first is None else int(tokens[first]),
        labels,
        first_tokens,
        settled_tokens,
        [str(s.revision[c]) for c in at],
        stable,
        first_median,
        settled_median,
        scaled(first_median, per_total, "fraction of the series' tokens"),
        scaled(settled_median, per_total, "fraction of the series' tokens"),
        early_tokens,
        Share.of(int((settled_tokens <= early_tokens).sum()), len(final)),
    )


def transition_findings(
    s, tokens: np.ndarray, transitions, fdr: float = FDR, resampling: Resampling = DEFAULT_RESAMPLING
) -> Transitions:
    """Finding 2 from a `SeriesStates`, its `path_tokens` and the function's stored transitions."""
    rank = {r: i for i, r in enumerate(s.revision.tolist())}
    to = np.array([rank.get(r, -1) for r in transitions.column("to_revision").to_pylist()], dtype=np.int64)
    if (to < 0).any():
        raise StoreError(f"{s.model_id} {s.score_fn}: a transition names a checkpoint the series lacks")
    confident = confident_at(transitions, fdr)  # [transition]
    blip = np.array([b is True for b in transitions.column("blip").to_pylist()], dtype=bool)
    fell = np.asarray(transitions.column("to_state").to_pylist(), dtype=object) == "dormant"
    p = np.array([np.nan if x is None else x for x in transitions.column("confident_p").to_pylist()], np.float64)
    width = int(s.head_index.max()) + 1 if len(s.head_index) else 1
    head_of = {k: h for h, k in enumerate((s.layer.astype(np.int64) * width + s.head_index).tolist())}
    keys = np.asarray(transitions.column("layer"), np.int64) * width + np.asarray(transitions.column("head_index"))
    head = np.array([head_of.get(k, -1) for k in keys.tolist()], dtype=np.int64)
    n_heads = len(s.layer)
    per_head = np.bincount(head, minlength=n_heads) if head.size else np.zeros(n_heads, np.int64)
    per_head_sure = np.bincount(head[confident], minlength=n_heads) if head.size else np.zeros(n_heads, np.int64)

    has_pred = np.flatnonzero(s.predecessor >= 0)  # [interval] the later checkpoint of each compared pair
    span = tokens[has_pred] - tokens[s.predecessor[has_pred]]  # [interval]
    steps = s.step[has_pred] - s.step[s.predecessor[has_pred]]  # [interval]
    stages = []
    for stage in sorted(set(s.stage[has_pred].tolist())):
        mine = s.stage[to] == stage  # [transition]
        n_sure = int((confident & mine).sum())
        in_stage = s.stage[has_pred] == stage  # [interval]
        stage_tokens = int(span[in_stage].sum())
        scale = 1e9 / stage_tokens if stage_tokens > 0 else float("nan")
        sure_head = np.bincount(head[confident & mine], minlength=n_heads)  # [head] each head's whole history
        low, high = poisson_interval(n_sure)
        gaps = span[in_stage]
        stages.append(
            StageRate(
                int(stage),
                int(mine.sum()),
                n_sure,
                stage_tokens,
                Estimate(float(np.median(gaps)), float(gaps.min()), float(gaps.max()), "median (min-max)", "tokens"),
                rate_estimate(sure_head, stage_tokens, resampling),
                Estimate(n_sure * scale, low * scale, high * scale, POISSON, "per billion tokens"),
            )
        )
    into = np.searchsorted(has_pred, to)  # [transition] its interval
    n_int = len(has_pred)
    sure_per = np.bincount(into[confident], minlength=n_int) if n_int else np.zeros(0, np.int64)
    all_per = np.bincount(into, minlength=n_int) if n_int else np.zeros(0, np.int64)
    return Transitions(
        int(len(to)),
        int(fell.sum()),
        int((~fell).sum()),
        int(confident.sum()),
        int(blip.sum()),
        fdr,
        f"Benjamini-Hochberg q < {fdr:g} over {n_heads * n_int} (head, interval) tests",
        n_heads * n_int,
        int((~np.isnan(p)).sum()),
        int((p < fdr).sum()),
        stages,
        Share.of(int((per_head > 0).sum()), n_heads),
        Share.of(int((per_head > 1).sum()), n_heads),
        int((per_head_sure > 1).sum()),
        tokens[has_pred].astype(np.int64),
        span.astype(np.int64),
        steps.astype(np.int64),
        sure_per.astype(np.int64),
        (all_per - sure_per).astype(np.int64),
    )


def input_dependence(
    views, score_fn: str, s, tokens: np.ndarray, resampling: Resampling = DEFAULT_RESAMPLING
) -> InputDependence:
    """Finding 3: the calibration sets' masks through training (the `calibration_agreement` table, computed
    when the store has none yet) and the noise floor at the last shared checkpoint (`set_noise_floor`). Not
    measured with fewer than two sets."""
    from dormant_tasks.store.io import read_table
    from dormant_tasks.tracking.agreement import TABLE, set_agreement

    ids = [v.calibration_id for v in views]
    if len(ids) < 2:
        return InputDependence(ids)
    model_id = views[0].model_id
    table = read_table(views[0].store, TABLE, model_id)
    if table.num_rows == 0:
        table = set_agreement(views[0].store, model_id)
    rows = [r for r in table.to_pylist() if r["score_fn"] == score_fn]
    revisions = list(dict.fromkeys(r["revision"] for r in rows))  # the table is in series order
    if not revisions:
        return InputDependence(ids)
    rank = {r: i for i, r in enumerate(s.revision.tolist())}
    col = {r: j for j, r in enumerate(revisions)}
    both, union = np.zeros(len(revisions), np.int64), np.zeros(len(revisions), np.int64)  # [checkpoint]
    pairs = {(a, b): np.full(len(revisions), np.nan) for i, a in enumerate(ids) for b in ids[i + 1 :]}
    n_all, n_any = {}, {}
    for r in rows:
        j = col[r["revision"]]
        both[j] += r["n_both"]
        union[j] += r["n_dormant_a"] + r["n_dormant_b"] - r["n_both"]
        pairs[(r["calibration_a"], r["calibration_b"])][j] = r["jaccard"]
        n_all[j], n_any[j] = r["n_dormant_all"], r["n_dormant_any"]
    with np.errstate(invalid="ignore", divide="ignore"):
        jaccard = np.where(union > 0, both / np.where(union > 0, union, 1), np.nan)
    defined = np.flatnonzero(~np.isnan(jaccard))
    first = (revisions[defined[0]], float(jaccard[defined[0]])) if defined.size else None
    last = len(revisions) - 1
    # tokens of checkpoints the primary set lacks are unknown to its path: those columns keep their own count
    tok = np.array([tokens[rank[r]] if r in rank else -1 for r in revisions], dtype=np.int64)
    masks = set_masks(views, score_fn, revisions[last])  # per set, bool [head] (none without indicators)
    floor, note = set_noise_floor(views, score_fn, revisions[last], resampling)
    return InputDependence(
        ids,
        revisions,
        tok,
        jaccard,
        pairs,
        first,
        pooled_jaccard(masks, resampling) if masks else Estimate.undefined(resampling.method, "Jaccard"),
        Share.of(int(n_all[last]), int(n_any[last])),
        floor,
        note,
    )


def _indicators(views, score_fn: str, revision: str) -> tuple[list[np.ndarray], str]:
    """Per set scored at `revision`, bool [input, head] per-input inactive indicators (heads sorted by
    (layer, head), those of every set), or ([], why not)."""
    parts, keys = [], []
    for view in views:
        if revision not in view.revisions:
            continue
        t = view.head_scores([score_fn], [revision], columns=["layer", "head_index", "inactive_inputs"])
        n_inputs = next(int(c["n_inputs"]) for c in view.checkpoints if c["revision"] == revision)
        bits = t.column("inactive_inputs").to_pylist()
        if any(b is None for b in bits):
            return [], (
                f"calibration set {view.calibration_id} keeps no per-input indicators at {revision} (a result "
                "stored before they were kept): re-score it (a fresh store) to measure the noise floor"
            )
        key = (np.asarray(t.column("layer"), np.int64) << 20) + np.asarray(t.column("head_index"), np.int64)
        order = np.argsort(key)
        keys.append(key[order])
        parts.append(np.stack([unpack_inputs(bits[i], n_inputs) for i in order], axis=1))  # [input, head]
    if len(parts) < 2:
        return [], f"fewer than two calibration sets are scored at {revision}"
    shared = keys[0]
    for k in keys[1:]:
        shared = np.intersect1d(shared, k)
    return [x[:, np.isin(k, shared)] for x, k in zip(parts, keys)], ""


def set_masks(views, score_fn: str, revision: str) -> list[np.ndarray]:
    """Per set scored at `revision`, its bool [head] mask (`dormant`), over the heads every such set has,
    sorted by (layer, head)."""
    masks = []
    for view in views:
        if revision in view.revisions:
            t = view.head_scores([score_fn], [revision], columns=["layer", "head_index", "dormant"])
            key = (np.asarray(t.column("layer"), np.int64) << 20) + np.asarray(t.column("head_index"), np.int64)
            masks.append(dict(zip(key.tolist(), t.column("dormant").to_pylist())))
    shared = sorted(set.intersection(*(set(m) for m in masks))) if masks else []
    return [np.array([bool(m[k]) for k in shared], dtype=bool) for m in masks]


def pooled_jaccard(masks: list[np.ndarray], resampling: Resampling = DEFAULT_RESAMPLING) -> Estimate:
    """sum |A n B| / sum |A u B| over the pairs of masks (bool [head] each), with a bootstrap interval over
    heads: a head enters each resample once, with its counts over every pair."""
    both = sum((masks[a] & masks[b]).astype(np.int64) for a in range(len(masks)) for b in range(a + 1, len(masks)))
    union = sum((masks[a] | masks[b]).astype(np.int64) for a in range(len(masks)) for b in range(a + 1, len(masks)))
    both, union = np.asarray(both), np.asarray(union)  # [head]
    if not both.size:
        return Estimate.undefined(resampling.method, "Jaccard")
    idx = resample_heads(both.size, resampling, 40)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = both.sum() / union.sum()
        stats = both[idx].sum(axis=1) / union[idx].sum(axis=1)
    return Estimate(float(value), *bootstrap_interval(stats), resampling.method, "Jaccard")


def set_noise_floor(
    views, score_fn: str, revision: str, resampling: Resampling = DEFAULT_RESAMPLING
) -> tuple[NoiseFloor | None, str]:
    """`noise_floor` of the sets scored at `revision`, from their stored per-input indicators; (None, why)
    when they are not stored."""
    sets, note = _indicators(views, score_fn, revision)
    if not sets:
        return None, note
    if min(x.shape[0] for x in sets) < 2 or not sets[0].shape[1]:
        return None, "a calibration set has fewer than two inputs (it cannot be split in halves), or no head is shared"
    return noise_floor(sets, resampling, revision), ""
