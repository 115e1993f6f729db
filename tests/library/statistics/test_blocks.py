"""`statistics.infer_clusters` (statistics/blocks.py, docs/SCORES.md "Clusters the data do not name"): Politis and
White's block length against its closed form for an AR(1) series, and the clusters a decision uses when labels
are unknown or one level too fine: independent inputs stay single, blocks of neighbours are found with their
length, shuffled texts cannot be rescued (the docs say so), and the decision records which it was."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dormant_tasks.statistics import decide_states, infer_clusters, politis_white_block
from dormant_tasks.statistics.cluster_states import cluster_deviations
from tests.library.statistics.test_cluster_states import series


@pytest.mark.parametrize("phi", [0.3, 0.6])
def test_politis_white_matches_its_closed_form_for_an_ar1(phi):
    """Given the exact autocorrelations phi^k of an AR(1) (and a null spread small enough that the window reaches
    where they vanish), the circular-block length is (3/2 (2 phi / (1 - phi^2))^2)^(1/3) N^(1/3), rounded up."""
    n = 1000
    r = phi ** np.arange(n)
    want = (1.5 * (2 * phi / (1 - phi * phi)) ** 2) ** (1 / 3) * n ** (1 / 3)
    assert politis_white_block(r, spread=1e-4) == math.ceil(want)
    # with the reference's band (1/sqrt(N)) the window stops earlier: the block is no longer
    assert politis_white_block(r) <= math.ceil(want) + 1


def test_independent_inputs_stay_single():
    rng = np.random.default_rng(1)
    x, _, _, _ = series(rng, 12, 64, 128)
    made = infer_clusters(cluster_deviations(x, np.arange(128)), None)
    assert made.source == "absent" and made.block == 1 and made.neighbour_p > 0.01
    assert np.unique(made.labels).size == 128


def test_unlabelled_blocks_are_found_with_their_length_and_recorded():
    """Blocks of 8 neighbouring inputs (icc 0.5), no labels: neighbours are alike, the blocks formed are 8 long
    (or a multiple), and the decision says so; the same inputs shuffled cannot be rescued: taken as independent."""
    rng = np.random.default_rng(2)
    x, _, _, _ = series(rng, 12, 64, 128, cluster=8, icc=0.5)
    d = decide_states(x, None, np.arange(12) - 1)
    assert d.clusters.source == "inferred" and d.clusters.block == 8 and not d.clusters.labelled
    assert d.n_clusters == 128 // d.clusters.block
    assert "blocks of" in d.clusters.describe() and d.clusters.record()["block"] == d.clusters.block
    shuffled = x[..., rng.permutation(128)]
    assert decide_states(shuffled, None, np.arange(12) - 1).clusters.source == "absent"


def test_labels_one_level_too_fine_are_merged_and_right_ones_kept():
    """Pairs labelled inside files of 16 inputs (the file's effect icc 0.5): the pairs' neighbours are alike, so
    blocks of pairs are formed (8 pairs, a file); labels at the file level are kept as given."""
    rng = np.random.default_rng(3)
    x, files, _, _ = series(rng, 12, 64, 128, cluster=16, icc=0.5)
    pairs = np.arange(128) // 2
    fine = decide_states(x, pairs, np.arange(12) - 1)
    assert fine.clusters.source == "inferred" and fine.clusters.labelled and fine.clusters.block % 8 == 0
    right = decide_states(x, files, np.arange(12) - 1)
    assert right.clusters.source == "given" and right.n_clusters == 8
    assert decide_states(x, pairs, np.arange(12) - 1, neighbours=False).n_clusters == 64
