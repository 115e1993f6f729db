"""Clusters of inputs when their labels are unknown, or one level too fine (docs/SCORES.md §5, "Clusters the data do
not name"): `infer_clusters`, which `decide_states` calls on every decision.

Inputs are taken in their given order (a file's lines, a set's items as stored). The units are the given clusters
in order of their first input (one input per unit when no labels are given); a unit's deviation from one half at a
(checkpoint, head) cell is d = k - m / 2 (`cluster_states.cluster_deviations`).

- **Dependence between neighbours, tested.** Per cell, the units' deviations are standardised (cells where every
  unit agrees are left out); the correlation of two units is the mean product over the cells, and the lag-k
  autocorrelation r(k) is the mean over the pairs of units k apart. *Null*: the units' order is exchangeable
  (neighbours no more alike than any two units). *Test*: r(1) against the same statistic under NEIGHBOUR_PERMUTATIONS
  random orders of the units (each order moves whole units and is shared by every cell, so every dependence
  between heads, checkpoints and the inputs of one unit is kept): exact at any level. Rejected at NEIGHBOUR_LEVEL.
- **Block length** (when rejected): Politis and White's automatic block length (Politis & White 2004, "Automatic
  block-length selection for the dependent bootstrap", Econometric Reviews 23(1); with the correction of Patton,
  Politis & White 2009, Econometric Reviews 28(4)), the circular-block rule, from the pooled autocorrelations r(k)
  above: m^ the smallest lag after which K_N = max(5, sqrt(log10 N)) correlations are all within the band 2 s
  sqrt(log10 N); the flat-top window lambda over M = 2 m^ lags; g = sum lambda(k/M) r(k), G = sum lambda(k/M) |k|
  r(k); b = (2 G^2 / (4/3 g^2))^(1/3) N^(1/3), at most min(3 sqrt(N), N / 3); rounded up, at least 2. One change
  from the reference: s is the standard deviation of r(1) over the test's permutations (the exact null spread of
  the pooled statistic) where Politis and White use 1/sqrt(N), a single series' spread; pooled over cells r(k) is
  far less noisy, and with 1/sqrt(N) blocks of 8 inputs (icc 0.5) were cut into blocks of 3 that leave most of
  their dependence between the blocks.
- **Blocks.** Contiguous blocks of b' units become the clusters (a remainder under b'/2 joins the block before
  it), b' the shortest length among b/2 .. 2b whose blocks give a variance of the sum within BLOCK_TOLERANCE
  (5%) of the largest there, the variance being sum_blocks (sum e)^2 / sum e^2 averaged over the cells (e: the
  deviations less the cell's mean), so that blocks keep the covariance between neighbours (the largest) without
  merging more units than that needs (every merge halves the clusters: twins in blocks of 4 where 2 hold it).
  Politis-White's b alone is the length of least mean squared error for estimating that variance, which for a
  test can be too short (blocks that cut dependent neighbours apart leave their covariance out and make z too
  large): twins whose copies sit side by side gave b = 3, which splits a third of the pairs; the rule finds 2.
- **What it cannot do.** Shuffled texts whose dependence is unknown cannot be rescued: neighbours are then no more
  alike than any two inputs, the test finds nothing, and the inputs are taken as independent. Only the order can
  show dependence; a cluster label is the remedy there (`--cluster-field`).

Cost: O(cells x units^2) for the correlations (at most MAX_CELLS cells, drawn with the seed), O(NEIGHBOUR_PERMUTATIONS x
units) for the test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GIVEN, INFERRED, ABSENT = "given", "inferred", "absent"
NEIGHBOUR_LEVEL = 0.01  # the neighbour test's level: a false rejection only merges units (costs power, not validity)
NEIGHBOUR_PERMUTATIONS = 999
MAX_CELLS = 4096
BLOCK_TOLERANCE = 0.05  # the shortest block length whose variance is within this share of the largest


@dataclass(frozen=True)
class InferredClusters:
    """How a decision's clusters came about (`infer_clusters`): the store records `source` and `block`."""

    labels: np.ndarray  # int [input] the clusters used
    source: str  # GIVEN (labels as given, no dependence between neighbours found), INFERRED (blocks of neighbouring
    # units: the given labels merged, or the inputs themselves when none were given) or ABSENT (no labels given,
    # no dependence between neighbours found: one input per cluster)
    block: int  # units per block (1: none formed)
    neighbour_p: float  # the permutation p of "neighbours no more alike than any two units" (NaN: not tested)
    labelled: bool  # whether labels were given (a block is then of given clusters)

    def describe(self) -> str:
        """How the clusters were made, in words (beside every confident count)."""
        n = int(np.unique(self.labels).size)
        if self.source == INFERRED:
            unit = "given clusters" if self.labelled else "neighbouring inputs"
            return (
                f"{n} clusters inferred: blocks of {self.block} {unit} (neighbours alike, permutation p = "
                f"{self.neighbour_p:.2g}; Politis-White block length)"
            )
        if self.source == GIVEN:
            return f"{n} clusters as given"
        return f"no cluster labels; {n} inputs taken as independent (no dependence between neighbours found)"

    def record(self) -> dict:
        """The JSON the store keeps beside a decision (`tracking.transitions.fdr_record`)."""
        return {"source": self.source, "block": self.block, "neighbour_p": self.neighbour_p,
                "clusters": int(np.unique(self.labels).size)}  # fmt: skip


def unit_order(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unit [input], the units in order of their first input): each input's unit numbered by first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse], rank


def sample_cells(d: np.ndarray, seed: int) -> np.ndarray:
    """float64 [cell, unit]: at most MAX_CELLS cells of `d` ([cell, unit] deviations in unit order) whose units do
    not all agree, drawn with `seed` (before any copy: a series of 1,024 heads x 200 checkpoints has 204,800), each
    less its own mean (the dependence around each cell's own rate)."""
    total = d.shape[0]
    rng = np.random.default_rng([seed, 60])
    pick = np.sort(rng.choice(total, 8 * MAX_CELLS, replace=False)) if total > 8 * MAX_CELLS else np.arange(total)
    cells = d[pick].astype(np.float64)
    cells = cells[cells.std(axis=1) > 0][:MAX_CELLS]
    return cells - cells.mean(axis=1, keepdims=True)


def unit_correlations(cells: np.ndarray) -> np.ndarray:
    """float64 [unit, unit]: the units' correlation, the mean product of their standardised deviations over the
    cells (`sample_cells`)."""
    if not cells.shape[0]:
        return np.zeros((cells.shape[1], cells.shape[1]))
    y = cells / cells.std(axis=1, keepdims=True)  # [cell, unit]
    return (y.T @ y) / y.shape[0]


def autocorrelations(corr: np.ndarray) -> np.ndarray:
    """[lag] r(k), k = 0 .. units - 1: the mean correlation of units k apart."""
    n = corr.shape[0]
    return np.array([np.diagonal(corr, k).mean() for k in range(n)])


def neighbour_p(corr: np.ndarray, seed: int, permutations: int = NEIGHBOUR_PERMUTATIONS) -> tuple[float, float]:
    """(p, s): the permutation p of r(1) (module docstring), (1 + orders at least as alike) / (1 + permutations),
    and the standard deviation s of r(1) over the permutations."""
    n = corr.shape[0]
    if n < 4:
        return 1.0, float("nan")
    observed = np.diagonal(corr, 1).mean()
    rng = np.random.default_rng([seed, 61])
    orders = np.argsort(rng.random((permutations, n)), axis=1)  # [permutation, position]
    permuted = corr[orders[:, :-1], orders[:, 1:]].mean(axis=1)
    return float((1 + (permuted >= observed - 1e-12).sum()) / (1 + permutations)), float(permuted.std())


def politis_white_block(r: np.ndarray, spread: float | None = None) -> int:
    """The circular-block bootstrap's automatic block length (Politis & White 2004, Patton, Politis & White 2009)
    from the autocorrelations r(0..N-1) of a series of N units; at least 2. `spread`: the null standard deviation
    of r(k) (None: the reference's 1/sqrt(N))."""
    n = r.size
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    band = 2 * (1 / math.sqrt(n) if spread is None else spread) * math.sqrt(math.log10(n))
    m_max = math.ceil(math.sqrt(n)) + k_n
    b_max = math.ceil(min(3 * math.sqrt(n), n / 3))
    small = np.abs(r[1:]) < band  # [lag - 1]
    m_hat = m_max
    for m in range(0, max(n - 1 - k_n, 0) + 1):
        if small[m : m + k_n].all() and m + k_n <= small.size:
            m_hat = m
            break
    big_m = min(2 * max(m_hat, 1), m_max, n - 1)
    lags = np.arange(-big_m, big_m + 1)
    t = np.abs(lags) / big_m
    window = np.where(t <= 0.5, 1.0, np.where(t <= 1.0, 2 * (1 - t), 0.0))
    rk = r[np.abs(lags)]
    g = float((window * rk).sum())
    big_g = float((window * np.abs(lags) * rk).sum())
    if g <= 0:
        return 2
    d_cb = 4.0 / 3.0 * g * g
    b = (2 * big_g * big_g / d_cb) ** (1 / 3) * n ** (1 / 3)
    return int(min(max(math.ceil(b), 2), b_max))


def blocks(n_units: int, block: int) -> np.ndarray:
    """int [unit] contiguous blocks of `block` units; a remainder under block/2 joins the block before it."""
    label = np.arange(n_units) // block
    full = n_units // block
    if full and n_units - full * block < block / 2:
        label = np.minimum(label, full - 1)
    return label


def infer_clusters(d: np.ndarray, labels: np.ndarray | None, seed: int = 0) -> InferredClusters:
    """The clusters a decision uses (module docstring): `d` float32 [checkpoint, head, unit] deviations of the units
    (the given clusters in order of their first input, or the inputs), `labels` int [input] (None: none given)."""
    n_units = d.shape[-1]
    given = labels is not None
    unit, _ = unit_order(np.arange(n_units) if labels is None else np.asarray(labels))
    cells = sample_cells(d.reshape(-1, n_units), seed)
    corr = unit_correlations(cells)
    p, spread = neighbour_p(corr, seed)
    if p > NEIGHBOUR_LEVEL:
        base = unit if given else np.arange(n_units)
        return InferredClusters(base, GIVEN if given else ABSENT, 1, p, given)
    shortest = politis_white_block(autocorrelations(corr), spread)
    lengths = range(max(2, -(-shortest // 2)), max(min(2 * shortest, n_units // 2), 2) + 1)
    variance = {b: block_variance(cells, b) for b in lengths}
    top = max(variance.values())
    block = min(b for b, v in variance.items() if v >= (1 - BLOCK_TOLERANCE) * top)
    return InferredClusters(blocks(n_units, block)[unit], INFERRED, block, p, given)


def block_variance(cells: np.ndarray, block: int) -> float:
    """sum over blocks of (sum of e)^2 / sum of e^2, averaged over the cells (e: [cell, unit], none all zero)."""
    label = blocks(cells.shape[1], block)
    starts = np.flatnonzero(np.r_[True, label[1:] != label[:-1]])
    sums = np.add.reduceat(cells, starts, axis=1)  # [cell, block]
    return float(((sums**2).sum(axis=1) / (cells**2).sum(axis=1)).mean())
