"""Heads that changed on these inputs (docs/SCORES.md §5, "Paired changes"): per function and adjacent pair of
checkpoints, the paired test of each head's indicators on the same inputs, with the false discovery rate over the
heads (`paired_changes`); `pooled_qvalues` holds it over every function and calibration set of a series at once.

The question differs from a confident transition's. A confident transition says the head's *population* dormant
rate crossed one half; a paired change says that on *these* inputs the head's behaviour moved between the two
checkpoints (0.4 -> 0.6 on the same 128 inputs is a paired change, never a confident transition).

- **Statistic.** Per cluster c of the inputs, its net change n_c = (inputs active -> inactive) - (inactive ->
  active) between the two checkpoints; T = sum_c n_c.
- **Null.** The two checkpoints are exchangeable within each cluster (swapping the checkpoints' labels for a whole
  cluster leaves the joint distribution unchanged): the signs of the n_c are independent fair coins, whatever the
  inputs of a cluster share. *Test*: the exact sign-flip randomisation distribution of T, two-sided (p = P(|T*| >=
  |T|)), computed by convolution over the clusters (integer n_c: O(C x n) per test). With one input per cluster
  it is McNemar's exact test (`confidence.mcnemar_exact_p`): each discordant input flips independently, min(b, c)
  ~ Binomial(b + c, 1/2); with clusters the discordances of one cluster move together, so twins that flip together
  count once (McNemar on clustered inputs treats them as independent and is too sure).
- **Multiplicity.** Benjamini-Hochberg (or -Yekutieli) q-values over the heads of each adjacent pair (`family =
  "pair"`), or over every (pair, head) of the function (`"function"`); `pooled_qvalues` over several functions and
  calibration sets. A head is reported changed at a pair when q <= fdr.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dormant_tasks.statistics.confidence import bh_qvalues, mcnemar_exact_p
from dormant_tasks.statistics.defaults import FDR, FDR_METHOD, PAIRED_FDR_FAMILIES

# the families one function's paired changes are controlled over here; PAIRED_FDR_FAMILIES (defaults.py) adds
# "series", which pools every function and calibration set of a series (`pooled_qvalues`;
# `findings.series_findings(paired_family=...)`, `--paired-fdr` of `dormant findings`, `report` and `track`)
PAIRED_FAMILIES = PAIRED_FDR_FAMILIES[:2]  # "pair", "function"


@dataclass(frozen=True)
class PairedChanges:
    """`paired_changes`: per adjacent pair of checkpoints and head, the paired test and its q-value."""

    later: np.ndarray  # int64 [pair] the later checkpoint of each adjacent pair
    earlier: np.ndarray  # int64 [pair] the checkpoint it is compared with (its predecessor)
    net: np.ndarray  # int64 [pair, head] inputs active -> inactive less inactive -> active (> 0: towards dormant)
    p: np.ndarray  # [pair, head] the exact sign-flip p over clusters (McNemar's exact with single inputs)
    q: np.ndarray  # [pair, head] BH (or BY) q-value over the family
    fdr: float
    method: str  # "bh" or "by"
    family: str  # "pair": the heads of each pair; "function": every (pair, head) of the function
    n_clusters: int
    test: str  # the test's name, in words

    @property
    def changed(self) -> np.ndarray:
        """bool [pair, head]: changed on these inputs at the false discovery rate."""
        return self.q <= self.fdr

    @property
    def n_changed(self) -> int:
        return int(self.changed.sum())

    @property
    def heads_changed(self) -> int:
        """Heads changed at some pair."""
        return int(self.changed.any(axis=0).sum())


def sign_flip_p(net: np.ndarray) -> np.ndarray:
    """[test] two-sided exact p of T = sum_c net_c under independent fair signs of the net_c (`net`: int [test,
    cluster]): P(|T*| >= |T|), by convolution of each cluster's two values over the clusters."""
    net = np.asarray(net, dtype=np.int64)
    tests, _ = net.shape
    size = np.abs(net).sum(axis=1)  # [test] the largest |T*|
    width = int(size.max(initial=0))
    dist = np.zeros((tests, 2 * width + 1))  # [test, T* + width]
    dist[:, width] = 1.0
    rows = np.arange(tests)
    for col in net.T:  # [test] each cluster's |n_c|: half the mass moves up by it, half down
        step = np.abs(col)
        up = np.zeros_like(dist)
        down = np.zeros_like(dist)
        for s in np.unique(step):
            mine = rows[step == s]
            if s == 0:
                up[mine] = dist[mine]
                down[mine] = dist[mine]
                continue
            up[mine, s:] = dist[mine, :-s]
            down[mine, :-s] = dist[mine, s:]
        dist = 0.5 * (up + down)
    observed = np.abs(net.sum(axis=1))  # [test]
    reach = np.abs(np.arange(-width, width + 1))[None, :] >= observed[:, None] - 1e-9
    return np.minimum(1.0, (dist * reach).sum(axis=1))


def paired_changes(
    inactive: np.ndarray,
    clusters: np.ndarray | None,
    predecessor: np.ndarray,
    *,
    fdr: float = FDR,
    method: str = FDR_METHOD,
    family: str = "pair",
) -> PairedChanges:
    """The heads that changed on these inputs between each checkpoint and its predecessor (module docstring).

    inactive: bool [checkpoint, head, input]; clusters: int [input] (None: one input per cluster; pass the
    clusters a decision used, `StateDecision.clusters.labels`, so both read the inputs alike); predecessor: int
    [checkpoint] (-1: none)."""
    if family not in PAIRED_FAMILIES:
        raise ValueError(f"family {family!r}: choose one of {', '.join(PAIRED_FAMILIES)}")
    x = np.asarray(inactive, dtype=bool)
    pred = np.asarray(predecessor, dtype=np.int64)
    later = np.flatnonzero(pred >= 0)
    earlier = pred[later]
    n_inputs = x.shape[-1]
    labels = np.arange(n_inputs) if clusters is None else np.asarray(clusters)
    _, cl = np.unique(labels, return_inverse=True)
    n_clusters = int(cl.max(initial=-1)) + 1
    after, before = x[later], x[earlier]  # [pair, head, input]
    up = (after & ~before).astype(np.int64)  # active -> inactive
    down = (before & ~after).astype(np.int64)
    if n_clusters == n_inputs:  # one input per cluster: McNemar's exact test
        b, c = down.sum(axis=-1), up.sum(axis=-1)
        p = mcnemar_exact_p(b, c)
        test = "McNemar's exact test (single inputs)"
    else:
        order = np.argsort(cl, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(cl))[:-1]])
        per = np.add.reduceat((up - down)[..., order], starts, axis=-1)  # [pair, head, cluster] net change
        p = sign_flip_p(per.reshape(-1, n_clusters)).reshape(per.shape[:2])
        test = f"exact sign-flip test over {n_clusters} clusters (McNemar's, clustered)"
    net = (up - down).sum(axis=-1)
    if family == "pair":
        q = np.stack([bh_qvalues(row, method=method) for row in p]) if len(p) else p.copy()
    else:
        q = bh_qvalues(p, method=method)
    return PairedChanges(later, earlier, net, p, q, float(fdr), method, family, n_clusters, test)


def pooled_qvalues(ps: list[np.ndarray], method: str = FDR_METHOD) -> list[np.ndarray]:
    """BH (or BY) q-values of several families' p-values held as one family (every function and calibration set
    of a series: each `PairedChanges.p`), returned in their shapes."""
    flat = np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in ps]) if ps else np.zeros(0)
    q = bh_qvalues(flat, method=method)
    out, at = [], 0
    for p in ps:
        size = np.asarray(p).size
        out.append(q[at : at + size].reshape(np.shape(p)))
        at += size
    return out
