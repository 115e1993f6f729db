"""Whether a confident state is reachable at all with a set of input clusters (docs/SCORES.md §5, "Confidence", "When
nothing can be confident"): computed up front from the cluster sizes, so that a run whose clusters cannot carry a
confident state says so instead of reporting "0 confident" as if it were a finding.

A head's statistic at a checkpoint (`cluster_states.standardise`) is z = (|S| - delta) / |d|, S = sum_c d_c, d_c =
k_c - m_c / 2 the deviation of cluster c (size m_c) from one half, delta the smallest non-zero |d_c|. Its largest
value over every possible configuration (`largest_z`) depends on the sizes only. Bound: with c0 the cluster holding
delta, |z| <= sum_{c != c0} x_c / sqrt(delta^2 + sum_{c != c0} x_c^2) with 0 <= x_c = |d_c| <= m_c / 2; this grows as
delta shrinks (delta >= 1/2 when some size is odd, else >= 1) and as the caps grow (c0 taken as the smallest cluster
leaves the largest caps), and its maximum over the box is water-filling: x_c = min(m_c / 2, v) with v = (delta^2 +
sum x^2) / sum x at the optimum (a ratio of a linear and a convex function: every stationary point is the maximum).
It is exact up to the lattice of the x_c (one 109-input cluster and 19 singletons: 4.25, reached with the big
cluster at 55 of 109 and every singleton on one side; 16 blocks of 8: 3.87). With every cluster unanimous the
statistic is (n - m_min) / sqrt(sum m_c^2) (1.16 and 3.75 there): a balanced large cluster is what lets the others
speak, so that smaller figure is no bound.

What a confident state needs: its p, G(|z|) >= Phi(-|z|) (`cluster_states.TailGrid`), at most the level c = fdr x
max(R, 1) / H (BY: / sum_{i<=H} 1/i), R the heads selected. So with these clusters no state is confident unless R >=
ceil(H Phi(-largest) / fdr) (`ClusterReach.min_selected`); above H heads no state can ever be confident.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from dormant_tasks.statistics.defaults import FDR, FDR_METHOD, FEW_CLUSTERS


def harmonic(m: int) -> float:
    """sum_{i<=m} 1/i: Benjamini-Yekutieli's factor over m tests (1 for none)."""
    return float(np.sum(1.0 / np.arange(1, m + 1))) if m > 0 else 1.0


def largest_z(sizes) -> float:
    """The largest |z| that clusters of these sizes (int [cluster], each >= 1) allow, as in the module docstring (an
    upper bound, exact up to the lattice of the deviations)."""
    m = np.sort(np.asarray(sizes, dtype=np.float64))
    m = m[m > 0]
    if m.size < 2:
        return 0.0  # one cluster: |S| = delta, z = 0
    delta = 0.5 if (m % 2 == 1).any() else 1.0
    caps = m[1:] / 2  # [cluster] without the smallest, which holds delta; ascending
    best = 0.0
    below_sum, below_sq = 0.0, delta * delta  # clusters held at their caps (below v), with delta's square
    for i, cap in enumerate(caps):
        k = caps.size - i  # clusters at v
        # within (previous cap, cap]: the stationary point v = below_sq / below_sum, else the interval's end
        lo = caps[i - 1] if i else 0.0
        for v in (cap, below_sq / below_sum if below_sum > 0 else cap):
            if lo < v <= cap:
                best = max(best, (below_sum + k * v) / math.sqrt(below_sq + k * v * v))
        below_sum += cap
        below_sq += cap * cap
    return float(best)


@dataclass(frozen=True)
class ClusterReach:
    """Whether confident states are reachable with a series' input clusters (`cluster_reach`)."""

    n_clusters: int
    largest: float  # the largest |z| the cluster sizes allow (`largest_z`)
    needed: float  # the |z| the first confident state needs at least (R = 1): Phi^-1(1 - fdr / H [/ BY's sum])
    n_heads: int
    min_selected: int  # the fewest heads with a confident change for any state to be confident (> n_heads: never)

    @property
    def possible(self) -> bool:
        return self.min_selected <= self.n_heads

    def message(self) -> str | None:
        """What a count of confident states must say beside it; None when the first head can be confident."""
        what = f"|z| reaches at most {self.largest:.2f} with {self.n_clusters} clusters of inputs"
        if not self.possible:
            return (
                f"no state can be confident with these clusters at {self.n_heads} heads ({what}; a confident state "
                f"needs {self.needed:.2f} at the first head and more than that reach even if every head changes)"
            )
        if self.min_selected > 1:
            return (
                f"a state can be confident with these clusters at {self.n_heads} heads only when at least "
                f"{self.min_selected} heads change confidently ({what}; the first needs {self.needed:.2f})"
            )
        return None


def cluster_reach(
    sizes, n_heads: int, fdr: float = FDR, method: str = FDR_METHOD, small_sample: bool = True
) -> ClusterReach:
    """`ClusterReach` of clusters of these `sizes` (int [cluster]) at `n_heads` heads, BH (or BY) at `fdr`; with
    `small_sample`, below FEW_CLUSTERS clusters the largest |z| on the normal scale of `decide_states`' t(C - 1)
    reading."""
    sizes = np.asarray(sizes)
    largest = largest_z(sizes)
    df = int((sizes > 0).sum()) - 1
    if small_sample and 1 <= df < FEW_CLUSTERS - 1:
        largest = float(-special.ndtri(special.stdtr(df, -largest)))
    h = max(int(n_heads), 1)
    scale = fdr / (harmonic(h) if method == "by" else 1.0)  # the level is scale x max(R, 1) / H
    needed = float(stats.norm.isf(scale / h))
    need_r = math.ceil(float(stats.norm.sf(largest)) * h / scale * (1 - 1e-12))
    return ClusterReach(int((sizes > 0).sum()), largest, needed, int(n_heads), max(need_r, 1))


def cluster_sizes(labels) -> np.ndarray:
    """int [cluster] the sizes of the clusters named by `labels` (int [input])."""
    return np.unique(np.asarray(labels), return_counts=True)[1]
