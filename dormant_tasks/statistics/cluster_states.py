"""Confident states of a series' heads, with the calibration inputs' clusters as the unit and the multiplicity over
checkpoints taken from the series' own joint distribution (docs/SCORES.md §5, "Confidence"): `decide_states`.

The data of one head: the same n inputs, in C clusters (WinoGrande twins, a file, a document; when unknown, or when
neighbouring clusters are alike, contiguous blocks inferred from the inputs' order: `blocks.infer_clusters`), scored
at T checkpoints. Cluster c at checkpoint t has k_tc of its m_c inputs inactive,
and its deviation from a dormant rate of one half is d_tc = k_tc - m_c / 2.

- **Statistic.** z_t = (|S_t| - delta_t)+ sign(S_t) / sqrt(sum_c d_tc²), S_t = sum_c d_tc: the self-normalised
  cluster sum, i.e. the score statistic of "rate = 1/2" with the cluster-robust variance computed under that null
  (delta_t: half the sum's lattice step, the smallest non-zero |d_tc|, a continuity correction; with one input
  per cluster z_t is the binomial test's normal approximation with its continuity correction).
- **Null and what is resampled.** A head whose rate never crosses one half (it stays <= 1/2 at every checkpoint,
  or >= 1/2). At the boundary the clusters' deviations are independent across clusters with mean 0, however the
  inputs of one cluster agree with each other and however persistent each cluster is from one checkpoint to the
  next. The wild cluster bootstrap with the null imposed resamples exactly that: each cluster's whole series of
  deviations (d_1c .. d_Tc) is multiplied by one draw g_c, jointly at every checkpoint, so the resampled z* keep
  the clusters' correlation across checkpoints (Gaussian multipliers: z* = a_t . g with a_t = d_t / |d_t|).
- **Multiplicity over checkpoints** (Westfall-Young single step, the max statistic): a state is called dormant
  at t when G(z_t) <= c, active when G(-z_t) <= c, with G(x) = P(max_t z*_t >= x) the tail of the maximum over
  the head's whole series (symmetric: the minimum's tail is the same). A head whose rate never exceeds 1/2 is
  called dormant somewhere with probability G(x_c) = c, whatever its persistence: 200 nearly identical
  checkpoints cost about what one does, 200 independent ones what Bonferroni charges.
- **The tail** G(x) is far below what a plain resampling can reach (BH over 1,024 heads needs p ~ 1e-5), so it is
  computed by importance sampling of the union (ALOE, Owen, Maximov & Chertkov 2019): G(x) = T' Phi(-x)
  E[1 / N], the expectation over a checkpoint t drawn uniformly among the head's T' and g drawn given a_t . g >=
  x, N the checkpoints whose z* reach x; it has bounded relative error in the tail and lies between Phi(-x) and
  T' Phi(-x) (Bonferroni) by construction. It is estimated at the nodes x = 1, 1.5, ..., 8 (`NODES`) as r(x) = G(x) / Phi(-x), the
  head's effective number of checkpoints, interpolated linearly between them and raised where needed so that G
  is non-increasing (conservative), so that every decision below is one comparison. The nodes wholly below
  min(M, x_lo) (M below; x_lo where the lower bound Phi(-x) alone settles every state: `settled_below`) are read
  by nothing stored and left at Bonferroni's bound.
- **Per head**, p_head = G(M), M = the largest x at which the head is confidently in one state at a checkpoint
  and in the other at a later one on the same path (intersection-union: under either half of the null a claim
  needs a false call on that half's side). **Over heads**: Benjamini-Hochberg (or -Yekutieli) q-values of
  p_head; R heads have q <= fdr, and states are called at c = fdr x max(R, 1) / H (BY: / sum_{i<=H} 1/i), the
  level at which a head has a confident change exactly when it is one of the R.

Cost: counting clusters is O(T H n); the tail O(H x samples x T x (C + grid points up to the head's largest
|z|)), in chunks of heads sized to T (CHUNK_CELLS: linear in T, 256 heads x 128 inputs T 100 -> 1,000:
9.7x the CPU where fixed chunks of 32 heads took 20x, and whole-series temporaries of the rate interval 13x;
benchmarks/state_cost.py). 1,024 heads x 200 checkpoints x 128 inputs: 3.7 s of CPU
(independent inputs), 8.9 s (twins) on a shared 2-core machine (benchmarks/findings_calibration.py --timing). The
tail runs with the BLAS limited to one thread (threadpoolctl): its products are small per chunk of heads, and with
the default 2 threads on a busy 2-core machine one decision (256 heads x 100 checkpoints x 128 inputs) took 2.3x
to 4.1x the wall time of one thread (benchmarks/state_threads.py, two runs); the decision is the same. Deterministic: every draw comes from `seed` and is shared by all heads (a head's result does not depend
on the others, nor on the chunking).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special
from threadpoolctl import threadpool_limits

from dormant_tasks.statistics.blocks import ABSENT, GIVEN, InferredClusters, infer_clusters, unit_order
from dormant_tasks.statistics.confidence import wilson_interval
from dormant_tasks.statistics.defaults import FDR, FDR_METHOD, FEW_CLUSTERS, SEED, STATE_SAMPLES
from dormant_tasks.statistics.reachable import ClusterReach, cluster_reach, cluster_sizes, harmonic

NODE_STEP = 0.5
NODES = np.arange(1.0, 8.0 + NODE_STEP / 2, NODE_STEP)  # where the tail is estimated, then interpolated between
# heads per chunk of the tail, sized so that a chunk's [head, sample, checkpoint] arrays stay about this many
# (head, checkpoint) pairs whatever T: fixed at 32 heads, their size grew with T out of the cache (T 100 -> 1,000:
# 20x the CPU); the decisions do not depend on the chunking
CHUNK_CELLS = 3200


@dataclass(frozen=True)
class StateDecision:
    """`decide_states`: the confident states of one function's heads over one series, and how they were decided."""

    state: np.ndarray  # int8 [checkpoint, head]: +1 dormant, -1 active, 0 undetermined
    z: np.ndarray  # [checkpoint, head] the cluster-robust statistic (> 0: towards dormant), on the normal scale
    # (below FEW_CLUSTERS clusters its t(C - 1) tail mapped to the normal's: `t_to_normal`)
    state_p: np.ndarray  # [checkpoint, head] G(|z|): the state's p-value adjusted over the head's checkpoints
    head_p: np.ndarray  # [head] p of "changes confident state somewhere"
    head_q: np.ndarray  # [head] its q-value over the heads (`method`)
    level: float  # c: a state is confident when its state_p <= c
    method: str  # "bh" or "by"
    fdr: float
    n_clusters: int  # the units behind every test
    reach: ClusterReach  # whether the clusters let any state be confident at these heads (`cluster_reach`)
    clusters: InferredClusters  # the clusters used and how they came about: given, inferred (blocks) or absent
    # [checkpoint, head] the dormant rate's interval by the same rule (`rate_interval`: the rates a state test at
    # this checkpoint, with these clusters, at this level, does not reject): above 1/2 exactly when the state is
    # confidently dormant, below exactly when confidently active
    rate_low: np.ndarray
    rate_high: np.ndarray

    @property
    def n_selected(self) -> int:
        return int((self.head_q <= self.fdr).sum())


def decide_states(
    inactive: np.ndarray,
    clusters: np.ndarray | None,
    predecessor: np.ndarray,
    *,
    fdr: float = FDR,
    method: str = FDR_METHOD,
    samples: int = STATE_SAMPLES,
    seed: int = SEED,
    neighbours: bool = True,
    small_sample: bool = True,
) -> StateDecision:
    """Confident states from per-input indicators (docs/SCORES.md §5, "Confidence"; the method in this module's
    docstring).

    inactive: bool [checkpoint, head, input] (the stored `inactive_inputs`, unpacked); clusters: int [input] (the
    stored `input_clusters`; None: unknown); predecessor: int [checkpoint] the checkpoint each is
    compared with (-1: none), checkpoints in series order. `samples` importance samples per head and `seed` fix
    the tail's Monte Carlo; the same arguments give the same decision. `neighbours`: test the dependence between
    neighbouring clusters (or inputs, when `clusters` is None) in their given order and form contiguous blocks where
    it is present (`blocks.infer_clusters`); False takes the clusters (or single inputs) as they are.
    `small_sample`: with fewer than FEW_CLUSTERS clusters, read z's tail as Student's t with C - 1 degrees of freedom
    (`t_to_normal`); False: the normal at any number.
    """
    from dormant_tasks.statistics.states import fdr_qvalues

    x = np.asarray(inactive, dtype=bool)
    if x.ndim != 3:
        raise ValueError(f"inactive: [checkpoint, head, input], got shape {x.shape}")
    n_ckpt, n_heads, n_inputs = x.shape
    labels = np.arange(n_inputs) if clusters is None else np.asarray(clusters)
    if labels.shape != (n_inputs,):
        raise ValueError(f"clusters: one per input ({n_inputs}), got shape {labels.shape}")
    pred = np.asarray(predecessor, dtype=np.int64)
    labels, d, made = _clusters_of(x, clusters, seed, neighbours)
    z, norm = standardise(d)
    df = d.shape[-1] - 1 if small_sample and d.shape[-1] < FEW_CLUSTERS else 0
    z = t_to_normal(z, df)
    # no level can be below fdr / (H x BY's harmonic sum): where Bonferroni's bound is under that, G needs no finer
    floor = 0.1 * fdr / (max(n_heads, 1) * harmonic(max(n_heads, 1)))
    # the largest x at which the head is confidently on one side at i and on the other at a later j
    reach = _reach(z, pred)  # [head]
    settled = settled_below(reach, fdr, method)
    with threadpool_limits(1):  # small products per chunk: BLAS threads only wait (benchmarks/state_threads.py)
        tails = TailGrid.fit(d, norm, np.abs(z).max(axis=0, initial=0.0), samples, seed, floor, settled)
    state_p = tails.p(np.abs(z))  # [checkpoint, head]: the importance-sampled G from `settled` up
    head_p = tails.p(reach[None, :])[0]
    head_q = fdr_qvalues(head_p, method)
    selected = int((head_q <= fdr).sum())
    level = fdr * max(selected, 1) / n_heads if n_heads else 0.0
    if method == "by":
        level /= harmonic(n_heads)
    sure = state_p <= level
    state = np.where(sure & (z > 0), 1, np.where(sure & (z < 0), -1, 0)).astype(np.int8)
    sizes = cluster_sizes(labels)
    crit = tails.critical(level)  # [head] the |z| from which a state is confident
    low, high = rate_interval(d, label_sizes(labels), crit, df, state != 0)
    return StateDecision(
        state, z, state_p, head_p, head_q, float(level), method, float(fdr), int(sizes.size),
        cluster_reach(sizes, n_heads, fdr, method, small_sample), made, low, high,
    )  # fmt: skip


def settled_below(reach: np.ndarray, fdr: float, method: str) -> np.ndarray:
    """[head] the |z| below which no stored result of `decide_states` reads the head's tail G: min(reach, x_lo).

    G(x) >= Phi(-x) (the bound's lower side), so BH (BY) over the lower bounds Phi(-reach) rejects at least as many
    heads as over head_p = G(reach) (the step-up is monotone in the p-values): R <= R_max, so the level c = fdr
    max(R, 1) / H (BY: / its harmonic sum) is at most c_max = fdr max(R_max, 1) / H, and below x_lo = Phi^-1(1 -
    c_max) every state is settled unconfident by the bound alone (G(x) >= Phi(-x) > c_max >= c), as is every step
    of `TailGrid.critical`'s bisection there. head_p reads G at the head's reach, and G between two nodes reads
    those two (the monotone sweep runs from the right, so nodes to the left never change those to the right): the
    nodes wholly below min(reach, x_lo) change neither head_p, the level, the states, the critical |z| (the rate
    interval) nor the p of a confident transition; `TailGrid.fit` leaves them at Bonferroni's bound T' (`state_p`
    there is that bound, an upper one, where no decision turns on it)."""
    from dormant_tasks.statistics.states import fdr_qvalues

    n_heads = reach.size
    if not n_heads:
        return np.zeros(0)
    r_max = int((fdr_qvalues(special.ndtr(-reach), method) <= fdr).sum())
    c_max = fdr * max(r_max, 1) / n_heads / (harmonic(n_heads) if method == "by" else 1.0)
    return np.minimum(reach, -special.ndtri(c_max))


def cluster_deviations(inactive: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """float32 [checkpoint, head, cluster]: k_tc - m_c / 2, the clusters in the order of their labels."""
    _, cl = np.unique(labels, return_inverse=True)
    if cl.max(initial=-1) + 1 == labels.size:  # one input per cluster: no sums to make
        order = np.argsort(cl, kind="stable")
        return inactive[..., order].astype(np.float32) - np.float32(0.5)
    order = np.argsort(cl, kind="stable")
    sizes = np.bincount(cl)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    counts = np.add.reduceat(inactive[..., order].astype(np.int16), starts, axis=-1)
    return counts.astype(np.float32) - (sizes / 2).astype(np.float32)


def decision_clusters(inactive: np.ndarray, clusters: np.ndarray | None, seed: int = SEED) -> InferredClusters:
    """The clusters `decide_states` uses on these indicators (given, inferred blocks or absent), without the tail:
    what a paired test should read the inputs as (`statistics.paired_changes`). inactive: bool [checkpoint, head,
    input]."""
    return _clusters_of(np.asarray(inactive, dtype=bool), clusters, seed, True)[2]


def _clusters_of(x: np.ndarray, clusters, seed: int, neighbours: bool):
    """(labels [input], deviations [checkpoint, head, cluster], InferredClusters) of `decide_states`."""
    labels = np.arange(x.shape[-1]) if clusters is None else np.asarray(clusters)
    units, _ = unit_order(labels)  # the given clusters (or inputs) in order of their first input
    d = cluster_deviations(x, units)  # [checkpoint, head, unit]
    made = infer_clusters(d, None if clusters is None else units, seed) if neighbours else None
    labels = units  # d's clusters are in the order of their labels: `label_sizes(labels)` gives theirs
    if made is not None and made.block > 1:
        labels = made.labels
        d = cluster_deviations(x, labels)  # [checkpoint, head, cluster]
    if made is None:
        made = InferredClusters(units, ABSENT if clusters is None else GIVEN, 1, float("nan"), clusters is not None)
    return labels, d, made


def checkpoint_rate_interval(inactive: np.ndarray, clusters=None, small_sample: bool = True):
    """(low, high) [head]: the 95% interval of each head's dormant rate at one checkpoint by the rule of
    `decide_states` (`rate_interval` with the critical |z| of a single two-sided 95% test, Z95), with the inputs'
    clusters as given (None: each input its own; no blocks are inferred from one checkpoint). inactive: bool
    [head, input]. It lies above (below) 1/2 when the state test of this checkpoint alone rejects a rate of 1/2;
    the series' decision, over many checkpoints and heads, asks for more (`StateDecision.rate_low/high`)."""
    from dormant_tasks.statistics.confidence import Z95

    x = np.asarray(inactive, dtype=bool)[None]  # [1, head, input]
    labels = np.arange(x.shape[-1]) if clusters is None else np.asarray(clusters)
    d = cluster_deviations(x, labels)
    df = d.shape[-1] - 1 if small_sample and d.shape[-1] < FEW_CLUSTERS else 0
    low, high = rate_interval(d, label_sizes(labels), Z95, df)
    return low[0], high[0]


def label_sizes(labels: np.ndarray) -> np.ndarray:
    """[cluster] the clusters' sizes in the order `cluster_deviations` puts them (their labels sorted)."""
    return np.bincount(np.unique(labels, return_inverse=True)[1])


def standardise(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(z, norm), each [checkpoint, head]: the continuity-corrected self-normalised sums and |d_t| (0 where every
    cluster sits exactly at one half; its z is 0 and it never counts as a test)."""
    total = d.sum(axis=-1, dtype=np.float64)
    norm = np.sqrt(np.einsum("thc,thc->th", d, d, dtype=np.float64))
    return _corrected(total, norm, _half_step(d)), norm


def _half_step(d: np.ndarray) -> np.ndarray:
    """[checkpoint, head] the continuity correction: the smallest non-zero |d_tc| (the sum's lattice: its half
    step); 0 where every cluster sits exactly at one half."""
    out = np.empty(d.shape[:-1])
    rows = max(1, CHUNK_CELLS * 64 // max(int(np.prod(d.shape[1:])), 1))  # checkpoints at a time: small temporaries
    for t in range(0, d.shape[0], rows):  # (one pass over all of d made temporaries of 4x its size: T 1,000 cost 30x)
        nonzero = np.where(d[t : t + rows] != 0, np.abs(d[t : t + rows]), np.float32(np.inf)).min(axis=-1)
        out[t : t + rows] = np.where(np.isfinite(nonzero), nonzero, 0.0)
    return out


def _corrected(total: np.ndarray, norm: np.ndarray, delta: np.ndarray) -> np.ndarray:
    safe = np.where(norm > 0, norm, 1.0)
    return np.where(norm > 0, np.sign(total) * np.maximum(np.abs(total) - delta, 0.0) / safe, 0.0)


def rate_interval(
    d: np.ndarray, sizes: np.ndarray, crit, df: int = 0, at_half: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high), each [checkpoint, head]: the dormant rates p that the state test does not reject, by the rule
    of `decide_states` (the test of "rate = p" is the one of "rate = 1/2" with p in place of 1/2).

    d: float32 [checkpoint, head, cluster] the deviations k_tc - m_c / 2 (`cluster_deviations`, clusters in label
    order) and sizes: [cluster] m_c in the same order. At a rate p the deviations are d_tc(p) = d_tc + m_c (1/2 - p);
    z_t(p) is the self-normalised sum (`standardise`) with the continuity correction of p = 1/2 (so that z_t(1/2)
    is the decision's z_t), read as t(df) when df >= 1 (`t_to_normal`). p is rejected when |z_t(p)| >= crit
    ([head] or a number: the decision's critical |z|, `TailGrid.critical`; Z95 for a single 95% interval).
    `at_half`: bool [checkpoint, head], the decision itself at p = 1/2 (a confident state), which then stands for
    the comparison there, so that the interval lies above (below) 1/2 exactly when the state is confidently
    dormant (active). The rates are searched on the grid j / 2n, j = 0 .. 2n (n inputs: 1/2 and every k/n on it);
    the interval runs from the last rejected grid point below the first p not rejected to the first rejected one
    above the last (the hull, rounded outwards by at most 1/2n; k/n itself is never rejected), widened to the
    Wilson interval of k of n at the same critical value where that is wider (near a rate of 0 or 1, where the
    self-normalised variance vanishes). NaN with no input.
    """
    d = np.asarray(d)  # float64 one checkpoint at a time (the whole of it in float64: T 1,000 cost 30x T 100)
    sizes = np.asarray(sizes, dtype=np.float64)
    n_ckpt, n_heads, _ = d.shape
    n = int(sizes.sum())
    low, high = np.full((n_ckpt, n_heads), np.nan), np.full((n_ckpt, n_heads), np.nan)
    if n == 0:
        return low, high
    p = np.arange(2 * n + 1) / (2 * n)  # [grid]
    e = (0.5 - p)[:, None]  # [grid, 1]
    crit = np.broadcast_to(np.asarray(crit, dtype=np.float64), (n_heads,))
    sums = np.empty((n_ckpt, n_heads))  # [checkpoint, head] sum_c d_tc
    for t in range(n_ckpt):
        dt = d[t].astype(np.float64)  # [head, cluster]
        sums[t] = dt.sum(axis=-1)
        total = sums[t][None, :] + n * e  # [grid, head]
        norm2 = (dt**2).sum(axis=-1)[None, :] + 2 * e * (dt @ sizes)[None, :] + e * e * (sizes @ sizes)
        z = t_to_normal(_corrected(total, np.sqrt(np.maximum(norm2, 0.0)), _half_step(dt[None])), df)
        keep = np.abs(z) < crit[None, :]  # [grid, head] not rejected
        if at_half is not None:
            keep[n] = ~np.asarray(at_half[t], dtype=bool)
        first = np.argmax(keep, axis=0)
        last = keep.shape[0] - 1 - np.argmax(keep[::-1], axis=0)
        low[t] = np.where(keep.any(axis=0), p[np.maximum(first - 1, 0)], np.nan)
        high[t] = np.where(keep.any(axis=0), p[np.minimum(last + 1, 2 * n)], np.nan)
    # never narrower than Wilson's interval of k of n at the same critical value: the self-normalised variance
    # vanishes at a rate of 0 or 1 (0 of 128 alone would give [0, 0.008]); widening keeps "above 1/2 => confident"
    w_low, w_high = wilson_interval(sums + n / 2, n, np.minimum(crit, 40.0)[None, :])
    inf = np.isinf(crit)[None, :]
    return np.minimum(low, np.where(inf, 0.0, w_low)), np.maximum(high, np.where(inf, 1.0, w_high))


def t_to_normal(z: np.ndarray, df: int) -> np.ndarray:
    """z with its tail read as Student's t with `df` degrees of freedom, on the normal scale: sign(z) x
    Phi^-1(1 - F_t(|z|)) (the small-sample correction of cluster-robust tests, Cameron, Gelbach and Miller 2008: t
    with C - 1 degrees of freedom for C clusters). Unchanged for df < 1 (one cluster: z is 0 anyway)."""
    if df < 1:
        return z
    return np.sign(z) * -special.ndtri(special.stdtr(df, -np.abs(z)))


def _reach(z: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """[head] max over ordered pairs i before j on a path of max(min(z_i, -z_j), min(-z_i, z_j)): both states of
    a change are confident at any level whose critical value is at most this (0 without a pair)."""
    n_ckpt, n_heads = z.shape
    hi, lo = np.full_like(z, -np.inf), np.full_like(z, -np.inf)  # [checkpoint, head] max z, max -z on the path
    out = np.zeros(n_heads)
    for j in range(n_ckpt):
        if pred[j] >= 0:
            before_hi, before_lo = hi[pred[j]], lo[pred[j]]
            out = np.maximum(out, np.maximum(np.minimum(before_hi, -z[j]), np.minimum(before_lo, z[j])))
            hi[j], lo[j] = np.maximum(before_hi, z[j]), np.maximum(before_lo, -z[j])
        else:
            hi[j], lo[j] = z[j], -z[j]
    return out


@dataclass(frozen=True)
class TailGrid:
    """Per head, G(x) = P(max_t z*_t >= x) as the ratio r(x) = G(x) / Phi(-x) (between 1 and T', the head's
    "effective number of checkpoints") at the nodes x = NODES (`fit`), and its monotone interpolation (`p`)."""

    log_r: np.ndarray  # [head, node] log r, made so that G is non-increasing in x
    n_tests: np.ndarray  # [head] T': checkpoints whose z* is not identically 0

    @classmethod
    def fit(
        cls,
        d: np.ndarray,
        norm: np.ndarray,
        reach: np.ndarray,
        samples: int,
        seed: int,
        floor: float,
        settled: np.ndarray | None = None,
    ) -> TailGrid:
        """d: float32 [checkpoint, head, cluster] deviations and norm [checkpoint, head] their lengths; reach: [head]
        the largest x queried; where Bonferroni's bound T' Phi(-x) is below `floor` (no decision turns on G there)
        it stands for G, and so it does at the nodes wholly below `settled` ([head]: `settled_below`; G is read
        there by nothing that is stored), which are not estimated."""
        n_ckpt, n_heads, n_clusters = d.shape
        alive = (norm > 0).T  # [head, checkpoint]
        n_tests = alive.sum(axis=1)
        log_t = np.log(np.maximum(n_tests, 1)).astype(np.float64)
        log_r = np.repeat(log_t[:, None], NODES.size, axis=1)  # Bonferroni where not evaluated
        # the nodes each head needs: up to the first at or beyond its reach, short of where Bonferroni is below floor
        need = (NODES[None, :] <= np.maximum(reach, NODES[0])[:, None] + NODE_STEP) & (
            log_t[:, None] + special.log_ndtr(-NODES)[None, :] > np.log(floor)
        )
        if settled is not None:  # a node is read for x in [its left neighbour, its right neighbour)
            need &= np.append(NODES[1:], np.inf)[None, :] >= np.asarray(settled)[:, None]
        rng = np.random.default_rng([seed, 50])
        w = rng.standard_normal((samples, n_clusters)).astype(np.float32)  # shared by every head
        u = rng.random(samples)
        pick = rng.random(samples)
        per_chunk = max(1, CHUNK_CELLS // max(n_ckpt, 1))
        for start in range(0, n_heads, per_chunk):
            heads = np.arange(start, min(start + per_chunk, n_heads))
            heads = heads[n_tests[heads] > 1]  # one checkpoint (or none): G is Phi(-x) exactly, r = 1 = T'
            if heads.size:
                # the chunk's unit vectors a_t = d_t / |d_t|, [head, checkpoint, cluster]
                inv = np.where(norm[:, heads] > 0, 1.0 / np.where(norm[:, heads] > 0, norm[:, heads], 1.0), 0.0)
                unit = np.ascontiguousarray((d[:, heads, :] * inv[..., None].astype(np.float32)).transpose(1, 0, 2))
                got = _aloe(unit, alive[heads], w, u, pick, need[heads])
                log_r[heads] = np.where(need[heads], got, log_r[heads])
        # G non-increasing between and at the nodes: sweeping from the right, a node's log r is raised (never
        # lowered: conservative) to at least the next one's minus the hazard of Phi(-x) over the step
        hazard = np.exp(special.log_ndtr(-NODES) * -1.0 + _log_pdf(NODES))  # phi / Phi(-x) at each node
        for k in range(NODES.size - 2, -1, -1):
            log_r[:, k] = np.maximum(log_r[:, k], log_r[:, k + 1] - hazard[k] * NODE_STEP)
        return cls(log_r, n_tests)

    def critical(self, level: float) -> np.ndarray:
        """[head] the smallest |z| (to 1e-9) at which G(|z|) <= level, by bisection on `p` (non-increasing up to
        the last node); inf where no |z| up to 40 reaches it."""
        lo, hi = np.zeros(self.log_r.shape[0]), np.full(self.log_r.shape[0], 40.0)
        for _ in range(60):
            mid = (lo + hi) / 2
            below = self.p(mid) <= level
            hi, lo = np.where(below, mid, hi), np.where(below, lo, mid)
        return np.where(self.p(hi) <= level, hi, np.inf)

    def p(self, x: np.ndarray) -> np.ndarray:
        """G_h(x) for x [..., head] >= 0: Phi(-x) r(x), r interpolated linearly between the nodes (constant below
        the first), Bonferroni's T' beyond the last."""
        x = np.asarray(x, dtype=np.float64)
        k = np.clip(np.searchsorted(NODES, x, side="right") - 1, 0, NODES.size - 2)  # [..., head] left node
        heads = np.broadcast_to(np.arange(self.log_r.shape[0]), x.shape)
        left, right = self.log_r[heads, k], self.log_r[heads, k + 1]
        frac = np.clip((x - NODES[k]) / NODE_STEP, 0.0, 1.0)
        log_r = np.where(x > NODES[-1], np.log(np.maximum(self.n_tests, 1))[heads], left + frac * (right - left))
        return np.minimum(1.0, np.exp(special.log_ndtr(-x) + log_r))


def _log_pdf(x: np.ndarray) -> np.ndarray:
    return -0.5 * x * x - 0.5 * np.log(2 * np.pi)


def _aloe(
    unit: np.ndarray, alive: np.ndarray, w: np.ndarray, u: np.ndarray, pick: np.ndarray, need: np.ndarray
) -> np.ndarray:
    """log r [head, node] of a chunk of heads by ALOE (r = T' E[1 / N]) at the nodes it `need`s (others: 0)."""
    out = np.zeros(need.shape)
    zw = np.matmul(unit, w.T).transpose(0, 2, 1)  # [head, sample, checkpoint]: a_s . w
    # each sample's conditioning checkpoint, uniform among the head's live ones
    live = [np.flatnonzero(a) for a in alive]
    t = np.stack([idx[np.minimum((pick * idx.size).astype(np.int64), idx.size - 1)] for idx in live])  # [head, sample]
    rows = np.arange(unit.shape[0])[:, None]
    rho = np.matmul(unit[rows, t], unit.transpose(0, 2, 1))  # [head, sample, checkpoint]: a_s . a_t
    # z*_s = a_s . g with g = a_t y + (I - a_t a_t') w: rho_s y plus the part of a_s . w orthogonal to a_t
    base = zw - rho * zw[rows, np.arange(t.shape[1])[None, :], t][..., None]
    base = np.where(alive[:, None, :], base, -np.inf).astype(np.float32)
    rho = rho.astype(np.float32)
    n_tests = alive.sum(axis=1)
    for k, x in enumerate(NODES):
        sel = np.flatnonzero(need[:, k])
        if not sel.size:
            continue
        # a_t . g given a_t . g >= x: the truncated normal's quantile, computed in the upper tail for precision
        y = (-special.ndtri(u * special.ndtr(-x))).astype(np.float32)
        z = base[sel] + rho[sel] * y[None, :, None]
        n = np.maximum((z >= np.float32(x) * np.float32(1 - 1e-6)).sum(axis=-1), 1)  # [head, sample]; t counts
        out[sel, k] = np.log(n_tests[sel]) + np.log(np.mean(1.0 / n, axis=1))
    return out
