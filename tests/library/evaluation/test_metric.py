"""The leaderboard metric (docs/SCORES.md §6): % of heads zeroed within 1 point, and the normalised AUC."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dormant_tasks.errors import EvaluationError
from dormant_tasks.evaluation.metric import normalised_auc, pct_zeroed_within_1pt, task_average_curve

# The authors' published MMLU curves, kept in the repository (see tests/data/README.md). A missing file
# is an error at collection, never a skip.
PAPER_CURVES = Path(__file__).resolve().parents[2] / "data" / "paper_mmlu_curves.json"


def _paper_curves():
    return json.loads(PAPER_CURVES.read_text(encoding="utf-8"))["curves"]


@pytest.mark.parametrize("curve", _paper_curves(), ids=lambda c: f"{c['model']}-{c['function']}")
def test_reproduces_paper_table_2(curve):
    assert pct_zeroed_within_1pt(curve["points"], curve["base"]) == pytest.approx(curve["expected"], abs=0.01)


def test_paper_curves_file_has_the_five_published_curves():
    assert len(_paper_curves()) == 5


def test_one_crossing_is_interpolated():
    # line at 79: between (10, 80) and (20, 76) the curve is at 79 a quarter of the way -> x = 12.5
    assert pct_zeroed_within_1pt([(0, 80), (10, 80), (20, 76), (30, 70)], base=80) == pytest.approx(12.5)


def test_several_crossings_take_the_last():
    # down through 79 at 5, back up at 15, down again at 25
    pts = [(0, 80), (10, 78), (20, 80), (30, 78)]
    assert pct_zeroed_within_1pt(pts, base=80) == pytest.approx(25.0)
    # the last crossing may be upward: below the line from 5 on, back above it at 25 and staying there
    assert pct_zeroed_within_1pt([(0, 80), (10, 78), (20, 78), (30, 80)], base=80) == pytest.approx(25.0)


def test_never_crossing_gives_zero():
    assert pct_zeroed_within_1pt([(0, 80), (10, 79.5), (20, 79.2), (30, 79.1)], base=80) == 0.0  # never below
    assert pct_zeroed_within_1pt([(0, 70), (10, 65), (30, 60)], base=80) == 0.0  # always below


def test_a_point_exactly_on_the_line_is_a_crossing_at_its_x():
    # the authors' `get_intersection` rule: the curve ends on base - 1, so the last crossing is at 30
    assert pct_zeroed_within_1pt([(0, 80), (10, 79.5), (20, 79.2), (30, 79.0)], base=80) == 30.0
    # touching the line in the middle and rising again counts too; a later strict crossing wins
    assert pct_zeroed_within_1pt([(0, 80), (10, 79.0), (20, 79.5), (30, 79.6)], base=80) == 10.0
    assert pct_zeroed_within_1pt([(0, 80), (10, 79.0), (20, 79.5), (30, 78.5)], base=80) == pytest.approx(25.0)


def test_curve_that_starts_below_the_line():
    # below at x=0 (the base run is not one of the points), rises above at 5, falls below at 25
    pts = [(0, 78), (10, 80), (20, 80), (30, 78)]
    assert pct_zeroed_within_1pt(pts, base=80) == pytest.approx(25.0)


def test_point_on_the_line_counts_as_within():
    assert pct_zeroed_within_1pt([(0, 80), (10, 79), (20, 77)], base=80) == pytest.approx(10.0)


def test_unsorted_points_are_sorted_by_x():
    pts = [(20, 76), (0, 80), (30, 70), (10, 80)]
    assert pct_zeroed_within_1pt(pts, base=80) == pytest.approx(12.5)
    assert normalised_auc(pts) == pytest.approx(normalised_auc(sorted(pts)))


def test_ties_in_x_keep_their_order_as_the_authors_curves_do():
    a = [(0, 80), (10, 80), (10, 75), (20, 75)]  # a vertical drop at 10
    b = [(0, 80), (10, 75), (10, 80), (20, 75)]  # the same points, the drop's ends in the other order
    assert pct_zeroed_within_1pt(a, base=80) == pytest.approx(10.0)
    # a stable sort by x: (10, 80) stays after (10, 75), so the last crossing is on (10, 80)-(20, 75), at 12
    assert pct_zeroed_within_1pt(b, base=80) == pytest.approx(12.0)
    assert pct_zeroed_within_1pt(list(reversed(b)), base=80) == pytest.approx(10.0)  # (10, 80) before (10, 75)


def test_tolerance_is_absolute_points():
    pts = [(0, 50), (10, 49.5), (20, 48.5)]
    assert pct_zeroed_within_1pt(pts, base=50) == pytest.approx(15.0)
    assert pct_zeroed_within_1pt(pts, base=50, tolerance=0.25) == pytest.approx(5.0)


def test_normalised_auc_by_hand():
    # trapezoids: 10 * (80 + 80) / 2 + 20 * (80 + 60) / 2 = 800 + 1400 = 2200 over width 30
    assert normalised_auc([(0, 80), (10, 80), (30, 60)]) == pytest.approx(2200 / 30)
    # a flat curve's normalised AUC is its height, wherever it starts
    assert normalised_auc([(5, 42), (15, 42), (25, 42)]) == pytest.approx(42)


def test_normalised_auc_of_a_single_x_is_nan():
    assert math.isnan(normalised_auc([(0, 80), (0, 79)]))


@pytest.mark.parametrize("bad", [[], [(0, float("nan"))], [(float("inf"), 50)]])
def test_bad_curves_are_refused(bad):
    with pytest.raises(EvaluationError):
        pct_zeroed_within_1pt(bad, base=50)
    with pytest.raises(EvaluationError):
        normalised_auc(bad)


def test_task_average_curve_on_a_hand_made_pair_of_tasks():
    q = (0.0, 0.1, 0.2)
    # task A (base 80) stays within 1 point up to 20%; task B (base 60) loses 4 points at its second point
    a = [(0.0, 80.0), (10.0, 79.6), (20.0, 79.2)]
    b = [(0.0, 60.0), (14.0, 56.0), (30.0, 50.0)]
    points, base = task_average_curve({"a": (q, a, 80.0), "b": (q, b, 60.0)})
    assert base == pytest.approx(70.0)
    np.testing.assert_allclose(points, [(0.0, 70.0), (12.0, 67.8), (25.0, 64.6)])
    # the average's crossing of 69: from (0, 70) to (12, 67.8) at 12 * 1 / 2.2
    assert pct_zeroed_within_1pt(points, base) == pytest.approx(12 / 2.2)
    # averaging is point by point, not of the per-task metrics: A never crosses 79, so alone it gives 0
    # (the authors' rule), B alone 3.5; their mean 1.75 is not the average curve's 5.45
    assert pct_zeroed_within_1pt(a, 80.0) == 0.0
    assert pct_zeroed_within_1pt(b, 60.0) == pytest.approx(3.5)


def test_task_average_needs_the_same_quantiles():
    with pytest.raises(EvaluationError, match="same quantiles"):
        task_average_curve({"a": ((0.0, 0.1), [(0, 80), (10, 79)], 80), "b": ((0.0, 0.2), [(0, 60), (10, 59)], 60)})
    with pytest.raises(EvaluationError, match="no task curves"):
        task_average_curve({})
