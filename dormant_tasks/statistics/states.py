"""Confident states from inactive-input counts alone, and the confident transitions between opposite confident
states however the states were decided (docs/SCORES.md, "Confidence").

`cluster_states.decide_states` decides states from the per-input indicators and their clusters; this module keeps
the rule for results that store no indicators (rows upgraded from schema version 3), and the benchmark's OLD row.
At a checkpoint a head was inactive on k of the n calibration inputs. Its state is

- **dormant** when the exact one-sided binomial test rejects "dormant rate <= 0.5" (p_dormant = P(X >= k), X ~
  Binomial(n, 1/2)) at the state level `c`,
- **active** when it rejects "dormant rate >= 0.5" (p_active = P(X <= k)) at `c`,
- **undetermined** otherwise (its rate is consistent with 0.5 at that level).

Per head, p_head = min(1, T x the smallest, over ordered pairs i before j on a path, of max(p_side(i),
p_opposite(j))), T the series' checkpoints: Bonferroni over the checkpoints, right for independent draws and far
too strict for persistent inputs (benchmarks/findings_calibration.py). Over heads: Benjamini-Hochberg (`bh`) or
-Yekutieli (`by`) q-values of p_head; states are called at c = fdr x max(R, 1) / (H x T) (BY: divided by
sum_{i<=H} 1/i as well). Assumption: the n inputs are independent draws given the head; clustered inputs make
every p too small, which is why `decide_states` replaced this rule where the indicators are stored.

A **confident transition** (`between_states`) goes from a confident state to the opposite confident state at a later
checkpoint on the same path (its predecessors), across any undetermined checkpoints between them; it is located
at the mask change (rate crossing 0.5) on that stretch where a one-change-point fit puts it (the CUSUM of
rate - 0.5 peaks there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from dormant_tasks.statistics.blocks import InferredClusters
from dormant_tasks.statistics.defaults import FDR_METHODS
from dormant_tasks.statistics.reachable import ClusterReach, harmonic

DORMANT, UNDETERMINED, ACTIVE = 1, 0, -1


def state_pvalues(k, n) -> tuple[np.ndarray, np.ndarray]:
    """(p_dormant, p_active), elementwise: exact one-sided binomial p-values of k inactive inputs of n against a
    dormant rate of 0.5 (p_dormant = P(X >= k), p_active = P(X <= k), X ~ Binomial(n, 1/2)). NaN k or n <= 0 gives
    (1, 1): no evidence either way."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k, n = np.broadcast_arrays(k, n)
    ok = ~np.isnan(k) & ~np.isnan(n) & (n > 0)
    kk, nn = np.where(ok, k, 0.0), np.where(ok, n, 1.0)
    p_dormant = np.where(ok, stats.binom.sf(kk - 1, nn, 0.5), 1.0)
    p_active = np.where(ok, stats.binom.cdf(kk, nn, 0.5), 1.0)
    return p_dormant, p_active


def fdr_qvalues(p, method: str = "bh", m: int | None = None) -> np.ndarray:
    """q-values of the p-values `p` (NaN: no test) in a family of `m` tests (default: the non-NaN p's; the others
    count at p = 1), by Benjamini-Hochberg (`bh`) or Benjamini-Yekutieli (`by`: BH's q times sum_{i<=m} 1/i).
    Rejecting q <= level is the step-up procedure at that level (`confidence.bh_qvalues`)."""
    from dormant_tasks.statistics.confidence import bh_qvalues

    if method not in FDR_METHODS:
        raise ValueError(f"unknown false discovery rate method {method!r}: choose one of {', '.join(FDR_METHODS)}")
    return bh_qvalues(p, m, method)


@dataclass(frozen=True)
class StateTransitions:
    """The confident states and transitions of one function's heads over one series (`state_transitions`)."""

    state: np.ndarray  # int8 [checkpoint, head]: DORMANT, ACTIVE or UNDETERMINED at the state level
    level: float  # c: a state is confident when its one-sided p <= c
    head_p: np.ndarray  # [head] p of "changes confident state somewhere" (Bonferroni over the T checkpoints)
    head_q: np.ndarray  # [head] its q-value over the heads (`method`)
    method: str  # "bh" or "by"
    fdr: float
    # one entry per confident transition, ordered by (head, checkpoint)
    head: np.ndarray  # int64 [transition]
    start: np.ndarray  # int64 [transition] the confident checkpoint it leaves
    end: np.ndarray  # int64 [transition] the confident checkpoint it reaches
    at: np.ndarray  # int64 [transition] where it is located: the checkpoint the mask changes into
    to_dormant: np.ndarray  # bool [transition]
    p: np.ndarray  # [transition] max of the two states' p-values (the intersection-union test of both states)
    reach: ClusterReach | None = None  # whether the inputs' clusters let any state be confident (None: not decided
    # from clusters: `state_transitions` on counts)
    clusters: InferredClusters | None = None  # the clusters used: given, inferred (blocks) or absent (None: counts)

    @property
    def n_selected(self) -> int:
        return int((self.head_q <= self.fdr).sum())


def state_transitions(
    k: np.ndarray, n: np.ndarray, predecessor: np.ndarray, dormant: np.ndarray, fdr: float, method: str = "bh"
) -> StateTransitions:
    """Confident states and transitions from inactive-input counts.

    k: [checkpoint, head] inputs on which the head is inactive (NaN: unknown); n: [checkpoint] inputs;
    predecessor: [checkpoint] the checkpoint each is compared with (-1: none), checkpoints in series order;
    dormant: bool [checkpoint, head] the mask (rate >= 0.5), where transitions are located.
    """
    k = np.asarray(k, dtype=np.float64)
    n_ckpt, n_heads = k.shape
    p_dormant, p_active = state_pvalues(k, np.asarray(n, dtype=np.float64)[:, None])  # [checkpoint, head] each
    pred = np.asarray(predecessor, dtype=np.int64)

    # 1. per head: min over ordered pairs (i an ancestor of j) of max(p_side(i), p_opposite(j))
    best_d, best_a = np.ones_like(p_dormant), np.ones_like(p_active)  # [checkpoint, head] min over ancestors
    pair = np.ones(n_heads)  # [head]
    for j in range(n_ckpt):
        if pred[j] >= 0:
            before_d, before_a = best_d[pred[j]], best_a[pred[j]]
            pair = np.minimum(pair, np.minimum(np.maximum(before_d, p_active[j]), np.maximum(before_a, p_dormant[j])))
            best_d[j], best_a[j] = np.minimum(before_d, p_dormant[j]), np.minimum(before_a, p_active[j])
        else:
            best_d[j], best_a[j] = p_dormant[j], p_active[j]
    head_p = np.minimum(1.0, n_ckpt * pair)
    head_q = fdr_qvalues(head_p, method)
    selected = int((head_q <= fdr).sum())
    level = fdr * max(selected, 1) / (n_heads * n_ckpt) if n_heads and n_ckpt else 0.0
    if method == "by":
        level /= harmonic(n_heads)

    # 2. states at that level, and the changes between consecutive confident states on each path
    state = np.where(p_dormant <= level, DORMANT, np.where(p_active <= level, ACTIVE, UNDETERMINED)).astype(np.int8)
    rate = k / np.asarray(n, dtype=np.float64)[:, None]
    state_p = np.minimum(p_dormant, p_active)  # at a confident state, the p of its side (the other is >= 1/2)
    return between_states(state, state_p, pred, dormant, rate, head_p, head_q, level, method, fdr)


def between_states(
    state: np.ndarray,
    state_p: np.ndarray,
    predecessor: np.ndarray,
    dormant: np.ndarray,
    rate: np.ndarray,
    head_p: np.ndarray,
    head_q: np.ndarray,
    level: float,
    method: str,
    fdr: float,
) -> StateTransitions:
    """The confident transitions of confident states, however they were decided (`state_transitions` here,
    `cluster_states.decide_states` from per-input indicators): from each confident state to the opposite confident
    state at the nearest later confident checkpoint on its path, located at the mask change (`dormant`, [checkpoint,
    head]) where the CUSUM of `rate` - 1/2 peaks; its p is the larger of the two states' `state_p`."""
    pred = np.asarray(predecessor, dtype=np.int64)
    n_ckpt, n_heads = state.shape
    last = np.full((n_ckpt, n_heads), -1, dtype=np.int64)  # [checkpoint, head] nearest confident ancestor-or-self
    found = []  # (head, start, end)
    for j in range(n_ckpt):
        before = last[pred[j]] if pred[j] >= 0 else np.full(n_heads, -1, dtype=np.int64)
        sure = state[j] != UNDETERMINED
        last[j] = np.where(sure, j, before)
        has = sure & (before >= 0)
        prior_state = np.where(has, state[np.maximum(before, 0), np.arange(n_heads)], UNDETERMINED)
        for h in np.flatnonzero(has & (prior_state == -state[j])):
            found.append((int(h), int(before[h]), j))
    found.sort()
    at = [_locate(pred, s, e, dormant[:, h], rate[:, h]) for h, s, e in found]
    head = np.array([f[0] for f in found], dtype=np.int64)
    start = np.array([f[1] for f in found], dtype=np.int64)
    end = np.array([f[2] for f in found], dtype=np.int64)
    to_dormant = state[end, head] == DORMANT if found else np.zeros(0, bool)
    p = np.maximum(state_p[start, head], state_p[end, head]) if found else np.zeros(0)
    return StateTransitions(
        np.asarray(state, dtype=np.int8),
        float(level),
        np.asarray(head_p, dtype=np.float64),
        np.asarray(head_q, dtype=np.float64),
        method,
        float(fdr),
        head,
        start,
        end,
        np.array(at, dtype=np.int64),
        np.asarray(to_dormant, dtype=bool),
        np.asarray(p, dtype=np.float64),
    )


def _locate(pred: np.ndarray, start: int, end: int, dormant: np.ndarray, rate: np.ndarray) -> int:
    """The checkpoint on the path start -> end into which the head's mask changes to its new side, where the
    CUSUM of (rate - 0.5), signed towards the old side, peaks (the one-change-point fit); the earliest on ties."""
    path = [end]
    while path[-1] != start:
        path.append(int(pred[path[-1]]))
    path.reverse()  # [position] start ... end
    old = bool(dormant[start])
    sign = 1.0 if old else -1.0
    best, best_score, score = end, -np.inf, 0.0
    for i in range(1, len(path)):
        if bool(dormant[path[i - 1]]) == old and bool(dormant[path[i]]) != old and score > best_score:
            best, best_score = path[i], score
        score += sign * (float(rate[path[i]]) - 0.5)
    return best
