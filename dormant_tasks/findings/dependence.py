"""The third finding: do dormant heads depend on the input text? The masks of a series' calibration sets
compared at their last shared checkpoint against the noise floor: across-set minus within-set agreement of
random halves, with a bootstrap interval over heads and a permutation test over set labels (`noise_floor`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.statistics import (
    DEFAULT_RESAMPLING,
    Z95,
    Estimate,
    Resampling,
    Share,
    bootstrap_interval,
    resample_heads,
    unpack_inputs,
)


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


def input_dependence(
    views, score_fn: str, s, tokens: np.ndarray, resampling: Resampling = DEFAULT_RESAMPLING
) -> InputDependence:
    """Finding 3: the calibration sets' masks through training (the `calibration_agreement` table, computed
    when the store has none yet) and the noise floor at the last shared checkpoint (`set_noise_floor`). Not
    measured with fewer than two sets."""
    from dormant_tasks.store import read_table
    from dormant_tasks.tracking import AGREEMENT_TABLE, set_agreement

    ids = [v.calibration_id for v in views]
    if len(ids) < 2:
        return InputDependence(ids)
    model_id = views[0].model_id
    table = read_table(views[0].store, AGREEMENT_TABLE, model_id)
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
