"""The third finding: do dormant heads depend on the input text? The masks of a series' calibration sets
compared at their last shared checkpoint against the noise floor: the agreement of sets of different kinds of
text minus that of disjoint sets of one kind (or of a set's halves), tested by permuting whole clusters of
inputs between the sets, with the interval that inverts the same test (`noise_floor`, pure: arrays in)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.statistics import (
    DEFAULT_RESAMPLING,
    Estimate,
    Resampling,
    Share,
    bootstrap_interval,
    resample_heads,
    unpack_inputs,
)

ALPHA = 0.05  # the level of the test, and 1 - the interval's coverage (the interval inverts the test)
NULL = "dormancy does not depend on the kind of text: clusters are exchangeable between the sets"


@dataclass(frozen=True)
class NoiseFloor:
    """Across-kind vs same-kind agreement of the sets' masks at one checkpoint, tested by permuting whole
    clusters (`noise_floor`)."""

    revision: str
    n_inputs: int  # inputs of every set together
    n_clusters: int  # clusters of every set together: the unit the permutations move
    halves: bool  # no kind has two sets: the same-kind reference is each set's two cluster-whole halves
    within: Estimate  # Jaccard of masks of the same kind (disjoint sets, or a set's halves), pooled over pairs
    across: Estimate  # Jaccard of masks of different kinds, pooled over pairs
    difference: Estimate  # across - within, its 95% interval the inverted permutation test (shift model)
    p_value: float  # two-sided permutation p of "across = within", whole clusters permuted
    permutations: int  # permutations behind p (those with a defined difference)
    kinds: tuple[str, ...] = ()  # per set, its kind
    null: str = NULL


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


def noise_floor(
    sets: Sequence[np.ndarray],
    clusters: Sequence[np.ndarray | None],
    kinds: Sequence[str],
    resampling: Resampling = DEFAULT_RESAMPLING,
    revision: str = "",
) -> NoiseFloor:
    """Across-kind vs same-kind agreement of one checkpoint's masks, with a cluster permutation test and the
    interval that inverts it (docs/SCORES.md §7). Pure: arrays in, a `NoiseFloor` out.

    sets: per calibration set, bool [input, head] per-input inactive indicators (the same heads in the same
    order); clusters: per set, int [input] its inputs' cluster labels (None: every input its own cluster);
    kinds: per set, the text it was drawn from (two sets of one kind are disjoint draws of that text).

    The parts compared are the sets when some kind has two sets or more, else each set's two halves, split at
    random cluster-whole. A part's mask is its heads with an inactive rate >= 0.5 over its inputs. Within: the
    pooled Jaccard (sum |A n B| / sum |A u B|) over the pairs of parts of one kind; across: over the pairs of
    different kinds; the statistic D = across - within. Null: the kind does not matter, so the clusters are
    exchangeable between the parts; each permutation deals the clusters out anew, every part keeping its number
    of clusters, and recomputes D. p = min(1, 2 min(p_low, p_high)), p_low = (1 + #{D* <= D}) / (1 + B) (p_high
    with >=). The 95% interval is the set of effects d0 the same test does not reject under a shift model (D - d0
    has the permutation distribution): [D - D*(B+1-m), D - D*(m)], m the smallest count whose p is >= 0.05, so
    it excludes 0 exactly when p < 0.05. Within and across get percentile intervals from a bootstrap of the
    clusters within each part. Inputs that come in clusters (twins, documents, files) make two samples of one
    text differ more than independent inputs would; a test that moves single inputs then rejects true nulls.
    """
    sets = [np.asarray(x, dtype=bool) for x in sets]
    _check_sets(sets, clusters, kinds)
    counts, sizes, owner = _cluster_counts(sets, clusters)
    halves = max(Counter(kinds).values()) < 2
    if halves:  # part 2k and 2k + 1: set k's clusters split at random, cluster-whole
        part = _halves(owner, len(sets), resampling)
        part_kind = [kinds[k // 2] for k in range(2 * len(sets))]
    else:
        part, part_kind = owner, list(kinds)
    parts = _Parts(counts, sizes, part_kind)
    within, across = (float(v[0]) for v in parts.jaccards(parts.masks(parts.one_hot(part[None]))))
    diff = across - within
    d_null = _permutation_null(part, parts, resampling)
    p, low, high = _inverted_permutation_test(diff, d_null)
    w_b, a_b = _cluster_bootstrap(part, parts.n_parts, parts.masks, parts.jaccards, resampling)
    n_clusters = counts.shape[0]
    unit = f"clusters ({n_clusters})"
    where = "each set's cluster-whole halves" if halves else "the sets"
    boot = f"bootstrap over clusters within each part ({resampling.resamples} resamples, seed {resampling.seed})"
    method = (
        f"permutation test inverted (shift model): whole clusters dealt anew between {where} "
        f"({d_null.size} permutations, seed {resampling.seed}); null: {NULL}; unit: {unit}"
    )
    return NoiseFloor(
        revision,
        sum(x.shape[0] for x in sets),
        n_clusters,
        halves,
        Estimate(within, *bootstrap_interval(w_b), boot, "Jaccard", n_clusters),
        Estimate(across, *bootstrap_interval(a_b), boot, "Jaccard", n_clusters),
        Estimate(diff, low, high, method, "Jaccard", n_clusters),
        p,
        int(d_null.size),
        tuple(kinds),
    )


def _check_sets(sets: list[np.ndarray], clusters: Sequence, kinds: Sequence[str]) -> None:
    if len(sets) < 2 or len(clusters) != len(sets) or len(kinds) != len(sets):
        raise ValueError("the noise floor compares two calibration sets or more, each with its clusters and kind")
    if len({x.shape[1] for x in sets}) != 1 or not sets[0].shape[1]:
        raise ValueError("every set needs the same heads, one at least")
    if len(set(kinds)) < 2:
        raise ValueError("the noise floor compares kinds of text: give two kinds or more (each set its own kind)")


def _cluster_counts(sets: list[np.ndarray], clusters: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The clusters of every set, numbered globally: inactive counts [cluster, head], sizes [cluster] and the set
    each belongs to [cluster]."""
    owner, counts, sizes = [], [], []
    for k, (x, c) in enumerate(zip(sets, clusters)):
        labels = np.arange(x.shape[0]) if c is None else np.unique(np.asarray(c), return_inverse=True)[1]
        if labels.shape != (x.shape[0],):
            raise ValueError(f"set {k}: {labels.size} cluster labels for {x.shape[0]} inputs")
        n = int(labels.max()) + 1 if labels.size else 0
        c_counts = np.zeros((n, x.shape[1]))
        np.add.at(c_counts, labels, x)
        counts.append(c_counts)
        sizes.append(np.bincount(labels, minlength=n))
        owner.append(np.full(n, k))
    return np.concatenate(counts), np.concatenate(sizes), np.concatenate(owner)


def _halves(owner: np.ndarray, n_sets: int, resampling: Resampling) -> np.ndarray:
    """[cluster] its part: 2k or 2k + 1 for the clusters of set k, split at random into halves, cluster-whole."""
    rng = resampling.rng(30)
    part = np.empty(owner.size, np.int64)
    for k in range(n_sets):
        own = np.flatnonzero(owner == k)
        if own.size < 2:
            raise ValueError(f"set {k} has fewer than two clusters: it cannot be split in halves")
        shuffled = rng.permutation(own)
        part[shuffled] = 2 * k + (np.arange(own.size) >= own.size // 2)
    return part


@dataclass(frozen=True)
class _Parts:
    """The parts compared and how their masks and agreements are computed from clusters dealt to them."""

    counts: np.ndarray  # [cluster, head] inactive inputs
    sizes: np.ndarray  # [cluster] inputs
    kinds: list[str]  # [part] the kind of text of each part

    @property
    def n_parts(self) -> int:
        return len(self.kinds)

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return [(a, b) for a in range(self.n_parts) for b in range(a + 1, self.n_parts)]

    def masks(self, weights: np.ndarray) -> np.ndarray:
        """bool [draw, part, head]: each part's mask; weights [draw, part, cluster], a cluster's count in a part."""
        inactive = weights @ self.counts  # [draw, part, head]
        total = weights @ self.sizes  # [draw, part]
        return 2 * inactive >= total[..., None]  # rate >= 0.5

    def jaccards(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """within and across, float [draw] (NaN: no part of those pairs marks a head)."""
        pairs = self.pairs
        same = np.array([self.kinds[a] == self.kinds[b] for a, b in pairs])
        a, b = zip(*pairs)
        both = (m[:, a] & m[:, b]).sum(axis=2)  # [draw, pair]
        union = (m[:, a] | m[:, b]).sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            return both[:, same].sum(1) / union[:, same].sum(1), both[:, ~same].sum(1) / union[:, ~same].sum(1)

    def one_hot(self, assignment: np.ndarray) -> np.ndarray:
        """[draw, cluster] part numbers -> [draw, part, cluster] weights."""
        return (assignment[:, None, :] == np.arange(self.n_parts)[None, :, None]).astype(np.float64)


def _permutation_null(part: np.ndarray, parts: _Parts, resampling: Resampling) -> np.ndarray:
    """D = across - within under the null, sorted, NaN dropped: the clusters dealt anew between the parts (each
    part keeping its number of clusters), in chunks of 100 permutations to bound memory."""
    null = []
    rng = resampling.rng(32)
    for start in range(0, resampling.permutations, 100):
        dealt = rng.permuted(np.tile(part, (min(100, resampling.permutations - start), 1)), axis=1)
        w, a = parts.jaccards(parts.masks(parts.one_hot(dealt)))
        null.append(a - w)
    d_null = np.sort(np.concatenate(null) if null else np.zeros(0))
    return d_null[~np.isnan(d_null)]


def permutation_p(count_low: int, count_high: int, n: int) -> float:
    """Two-sided permutation p with the +1 convention: min(1, 2 min(1 + count_low, 1 + count_high) / (1 + n)),
    count_low = #{D* <= D}, count_high = #{D* >= D} of n permutations."""
    return min(1.0, 2 * (1 + min(count_low, count_high)) / (1 + n))


def _inverted_permutation_test(diff: float, d_null: np.ndarray, alpha: float = ALPHA) -> tuple[float, float, float]:
    """(p, low, high): the two-sided p of D = `diff` against the sorted null `d_null`, and the effects d0 that
    the test does not reject at `alpha` when D - d0 has the null distribution (a shift model), clipped to the
    Jaccard's [-1, 1]. The interval is [D - d(n+1-m), D - d(m)] (1-based order statistics), m the smallest count
    whose p is >= alpha: 0 lies outside it exactly when p < alpha (for m = 0 nothing is rejected)."""
    n = d_null.size
    if math.isnan(diff) or not n:
        return float("nan"), float("nan"), float("nan")
    count_low = int(np.searchsorted(d_null, diff, side="right"))  # #{D* <= D}
    count_high = int(n - np.searchsorted(d_null, diff, side="left"))  # #{D* >= D}
    m = next(c for c in range(n + 1) if permutation_p(c, c, n) >= alpha)
    if m == 0:
        return permutation_p(count_low, count_high, n), -1.0, 1.0
    # d0 <= D - d(m)  <=>  #{D* <= D - d0} >= m;  d0 >= D - d(n+1-m)  <=>  #{D* >= D - d0} >= m
    low, high = diff - d_null[n - m], diff - d_null[m - 1]
    return permutation_p(count_low, count_high, n), float(max(-1.0, low)), float(min(1.0, high))


def _cluster_bootstrap(part, n_parts, masks, jaccards, resampling: Resampling) -> tuple[np.ndarray, np.ndarray]:
    """within and across, float [resample], each part's clusters drawn with replacement (its own number)."""
    rng = resampling.rng(31)
    out_w, out_a = [], []
    members = [np.flatnonzero(part == q) for q in range(n_parts)]
    for start in range(0, resampling.resamples, 100):
        r = min(100, resampling.resamples - start)
        weights = np.zeros((r, n_parts, part.size))
        for q, own in enumerate(members):
            drawn = own[rng.integers(0, own.size, size=(r, own.size))]  # [resample, cluster of the part]
            for i in range(r):
                weights[i, q] = np.bincount(drawn[i], minlength=part.size)
        w, a = jaccards(masks(weights))
        out_w.append(w)
        out_a.append(a)
    return np.concatenate(out_w), np.concatenate(out_a)


def input_dependence(
    views, score_fn: str, s, tokens: np.ndarray, resampling: Resampling = DEFAULT_RESAMPLING
) -> InputDependence:
    """Finding 3: the calibration sets' masks through training (the `calibration_agreement` table, computed
    when the store has none yet) and the noise floor at the last shared checkpoint (`set_noise_floor`). Not
    measured with fewer than two sets."""
    from dormant_tasks.store import Table, read_table
    from dormant_tasks.tracking import set_agreement

    ids = [v.calibration_id for v in views]
    if len(ids) < 2:
        return InputDependence(ids)
    model_id = views[0].model_id
    table = read_table(views[0].store, Table.calibration_agreement, model_id)
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
        pooled_jaccard(masks, resampling) if masks else Estimate.undefined(resampling.method_over("heads"), "Jaccard"),
        Share.of(int(n_all[last]), int(n_any[last])),
        floor,
        note,
    )


def _indicators(views, score_fn: str, revision: str) -> tuple[list[np.ndarray], list, list[str], str]:
    """Per set scored at `revision`: bool [input, head] per-input inactive indicators (heads sorted by
    (layer, head), those of every set), int [input] cluster labels (None: every input its own) and its
    calibration_id; or ([], [], [], why not)."""
    parts, keys, clusters, ids = [], [], [], []
    for view in views:
        if revision not in view.revisions:
            continue
        t = view.head_scores([score_fn], [revision], columns=["layer", "head_index", "inactive_inputs"])
        row = next(c for c in view.checkpoints if c["revision"] == revision)
        n_inputs = int(row["n_inputs"])
        bits = t.column("inactive_inputs").to_pylist()
        if any(b is None for b in bits):
            return (
                [],
                [],
                [],
                (
                    f"calibration set {view.calibration_id} keeps no per-input indicators at {revision} (a result "
                    "stored before they were kept): re-score it (a fresh store) to measure the noise floor"
                ),
            )
        key = (np.asarray(t.column("layer"), np.int64) << 20) + np.asarray(t.column("head_index"), np.int64)
        order = np.argsort(key)
        keys.append(key[order])
        parts.append(np.stack([unpack_inputs(bits[i], n_inputs) for i in order], axis=1))  # [input, head]
        labels = row.get("input_clusters")
        clusters.append(None if labels is None else np.asarray(labels, np.int64))
        ids.append(view.calibration_id)
    if len(parts) < 2:
        return [], [], [], f"fewer than two calibration sets are scored at {revision}"
    shared = keys[0]
    for k in keys[1:]:
        shared = np.intersect1d(shared, k)
    return [x[:, np.isin(k, shared)] for x, k in zip(parts, keys)], clusters, ids, ""


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
        return Estimate.undefined(resampling.method_over("heads"), "Jaccard")
    idx = resample_heads(both.size, resampling, 40)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = both.sum() / union.sum()
        stats = both[idx].sum(axis=1) / union[idx].sum(axis=1)
    # descriptive: the heads as units (the noise floor above is the test, with clusters of inputs as units)
    return Estimate(float(value), *bootstrap_interval(stats), resampling.method_over("heads"), "Jaccard", both.size)


def set_noise_floor(
    views, score_fn: str, revision: str, resampling: Resampling = DEFAULT_RESAMPLING
) -> tuple[NoiseFloor | None, str]:
    """`noise_floor` of the sets scored at `revision`, from their stored per-input indicators and clusters
    (`checkpoints.input_clusters`); (None, why) when the indicators are not stored. A set's kind is the text it
    was taken from (`calibration_kind`: `winogrande:1` and `winogrande:2` are one kind); when every set is of one
    kind, each set is its own kind, so the test asks whether the draws differ by more than their halves do."""
    from dormant_tasks.tracking import calibration_kind

    sets, clusters, ids, note = _indicators(views, score_fn, revision)
    if not sets:
        return None, note
    kinds = [calibration_kind(i) for i in ids]
    if len(set(kinds)) < 2:
        kinds = ids
    n_clusters = [x.shape[0] if c is None else np.unique(c).size for x, c in zip(sets, clusters)]
    if min(n_clusters) < 2 or not sets[0].shape[1]:
        return None, "a calibration set has fewer than two clusters of inputs, or no head is shared"
    return noise_floor(sets, clusters, kinds, resampling, revision), ""
