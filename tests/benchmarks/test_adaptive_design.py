"""benchmarks/adaptive_design.py: the refinement a budgeted run makes (checkpoints chosen from the observed masks),
and the FDR of the confident-state decision on the checkpoints it chose, at sizes a unit test affords."""

from dataclasses import replace
from pathlib import Path

import numpy as np

from tests.builders.benchmarks import load_benchmark

REPO = Path(__file__).resolve().parents[2]


def benchmark():
    return load_benchmark("adaptive_design")


def test_the_search_scores_where_the_masks_change():
    ad = benchmark()
    rates = np.full((65, 3), 0.1)
    rates[40:, 0] = 0.9  # one head falls dormant between checkpoints 39 and 40
    chosen = ad.adaptive(rates, 17)
    assert len(chosen) <= 17 and chosen[0] == 0 and chosen[-1] == 64
    assert {39, 40} <= set(chosen)  # the change is resolved to adjacent checkpoints


def test_the_confident_transitions_are_read_between_opposite_confident_states():
    ad = benchmark()
    state = np.array([[1, 0], [0, -1], [-1, 0], [-1, 1]], np.int8)  # head 0 wakes (0 -> 20), head 1 falls dormant
    got = ad.confident_transitions(state, [0, 10, 20, 30])
    assert got == {(0, -1, 0, 20), (1, 1, 10, 30)}
    assert ad.agree({(0, -1, 0, 20)}, {(0, -1, 15, 16)}) == 1 and ad.agree({(0, -1, 0, 20)}, {(0, 1, 15, 16)}) == 0


def test_fdr_under_the_adaptive_design_small():
    ad = benchmark()
    sizes = replace(ad.fc.SMALL, heads=96, reps=1)
    rows = ad.section_adaptive(sizes, 0)
    fdr = [r for r in rows if r.method.startswith("ADAPTIVE decide_states") and r.measured == "FDR"]
    assert len(fdr) == 4 and all(r.passed for r in fdr)  # two settings, the stress case, then pooled
    assert all(r.value <= 0.06 for r in fdr)
