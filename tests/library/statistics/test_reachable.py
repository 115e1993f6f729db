"""`statistics.cluster_reach` (statistics/reachable.py, docs/SCORES.md "When nothing can be confident"): the
largest |z| a cluster design allows, against every configuration of small designs, and the message a decision
carries on a design with one dominant cluster, where no state can be confident."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from dormant_tasks.statistics import cluster_reach, decide_states, largest_z


def z_of(deviations) -> float:
    nonzero = [abs(d) for d in deviations if d]
    if not nonzero:
        return 0.0
    return (abs(sum(deviations)) - min(nonzero)) / math.sqrt(sum(d * d for d in deviations))


@pytest.mark.parametrize("seed", range(3))
def test_largest_z_bounds_every_configuration_and_is_nearly_reached(seed):
    """Every configuration of small designs (each cluster's k from 0 to m) stays at or below `largest_z`, which the
    best of them reaches within 0.06 (the lattice of the deviations)."""
    rng = np.random.default_rng(seed)
    for _ in range(12):
        sizes = [int(m) for m in rng.integers(1, 7, size=int(rng.integers(2, 6)))]
        best = max(
            z_of([k - m / 2 for k, m in zip(ks, sizes)]) for ks in itertools.product(*(range(m + 1) for m in sizes))
        )
        bound = largest_z(sizes)
        assert best <= bound + 1e-12, sizes
        assert bound - best < 0.06, sizes


def test_unanimous_clusters_are_no_bound():
    """One 109-input cluster and 19 singletons: unanimous clusters give (n - m_min) / sqrt(sum m^2) = 1.16, but the
    big cluster at 55 of 109 with every singleton inactive gives 4.25, which `largest_z` covers."""
    sizes = [109] + [1] * 19
    assert z_of([55 - 109 / 2] + [0.5] * 19) == pytest.approx(4.2485, abs=1e-4)
    assert largest_z(sizes) >= z_of([55 - 109 / 2] + [0.5] * 19) - 1e-12
    assert (128 - 1) / math.sqrt(109**2 + 19) < 1.17


def test_a_dominant_cluster_says_no_state_can_be_confident():
    """126 inputs in one cluster and 2 singletons: |z| cannot pass 1.23, below what BH at 0.05 needs even if every
    head changes (1.645). The decision on such inputs (32 heads, half of them moving 0.05 <-> 0.95) has no confident
    state and carries the message, which names the heads and the design; with 64 singletons it has none."""
    rng = np.random.default_rng(0)
    clusters = np.array([0] * 126 + [1, 2])
    move = np.r_[np.full(16, 0.05), np.full(16, 0.5)]
    rates = np.stack([move, move, 1 - move, 1 - move])  # [checkpoint, head]
    x = rng.random((4, 32, 128)) < rates[..., None]
    d = decide_states(x, clusters, np.arange(4) - 1)
    assert not (d.state != 0).any()
    assert not d.reach.possible and d.reach.n_clusters == 3
    # 3 clusters: the statistic is read as t with 2 degrees of freedom, so its largest value on the normal scale
    assert d.reach.largest == pytest.approx(-stats.norm.ppf(stats.t.sf(largest_z([126, 1, 1]), 2)))
    assert d.reach.largest < largest_z([126, 1, 1]) < 1.645
    message = d.reach.message()
    assert message.startswith("no state can be confident with these clusters at 32 heads")
    assert "3 clusters" in message
    open_design = decide_states(x[..., :64], None, np.arange(4) - 1)
    assert open_design.reach.message() is None and (open_design.state != 0).any()


def test_between_the_two_it_names_how_many_heads_must_change():
    """16 blocks of 8 at 1,024 heads: |z| <= 3.86, the first confident state needs 3.90 (BH at 0.05), so a state
    can be confident only when at least 2 heads change (read as normal); read as t(15), as `decide_states` does
    below 30 clusters, at least 16; BY needs more."""
    r = cluster_reach([8] * 16, 1024, small_sample=False)
    assert r.possible and r.min_selected == 2 and r.needed == pytest.approx(3.896, abs=1e-3)
    assert "only when at least 2 heads change" in r.message()
    assert cluster_reach([8] * 16, 1024, method="by", small_sample=False).min_selected > 2
    assert cluster_reach([8] * 16, 32, small_sample=False).message() is None
    t = cluster_reach([8] * 16, 1024)
    assert t.largest == pytest.approx(-stats.norm.ppf(stats.t.sf(r.largest, 15)))
    assert t.min_selected == int(np.ceil(stats.norm.sf(t.largest) * 1024 / 0.05))
    # 30 clusters or more: the normal reading
    assert cluster_reach([2] * 64, 1024).largest == pytest.approx(largest_z([2] * 64))


def test_status_says_no_state_can_be_confident_with_a_dominant_cluster(tmp_path):
    """A stored series whose 128 inputs sit in one cluster of 126 and 2 singletons: `dormant status` names the
    design instead of a bare count, and the findings carry the same reach."""
    from dormant_tasks.findings import series_findings
    from flows.cli.status import series_line
    from tests.builders.stores import MODEL, write_series

    rng = np.random.default_rng(5)
    rates = np.stack([np.full((2, 4), r) for r in (0.1, 0.1, 0.9, 0.9)])  # [checkpoint, layer, head]
    inactive = rng.random((4, 128, 2, 4)) < rates[:, None]  # [checkpoint, input, layer, head]
    got = inactive.mean(axis=1)
    root = write_series(
        tmp_path / "store", {"ahon_ln": got >= 0.5}, [0, 10, 20, 30], rates={"ahon_ln": got}, n_inputs=128,
        inactive={"ahon_ln": inactive}, input_clusters=[0] * 126 + [1, 2],
    )  # fmt: skip
    line = series_line(root, MODEL)
    assert "no state can be confident with these clusters at 8 heads" in line
    t = series_findings(root, MODEL, "ahon_ln").transitions
    assert t.n_confident == 0 and not t.reach.possible and t.reach.n_clusters == 3
