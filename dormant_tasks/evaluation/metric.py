"""The leaderboard metric (docs/SCORES.md §6): "% of heads zeroed within 1 point", the normalised AUC, and the
average-across-tasks curve of the paper's headline.

A curve is a list of (x = measured % of heads zeroed, y = accuracy in %) points, one per threshold.

Public API
- `pct_zeroed_within_1pt(points, base, tolerance=1.0) -> float`
- `normalised_auc(points) -> float`
- `task_average_curve(curves) -> (points, base)`: point by point (the same quantiles in every task) the mean
  % zeroed and mean accuracy, against the mean base accuracy.
"""

from __future__ import annotations

import numpy as np

from dormant_tasks.errors import EvaluationError

WITHIN_POINTS = 1.0  # the leaderboard's tolerance: one absolute accuracy point (in %)
AVERAGE_TASK = "average"  # the label of the across-task average curve in tables


def _sorted_points(points) -> np.ndarray:
    """[n, 2] (x = % zeroed, y = accuracy) sorted by x, points of equal x kept in the order given (a stable sort,
    as the authors' curves keep their file order, i.e. the thresholds' order): the same points in another
    order can give another crossing, as theirs do."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if len(pts) == 0:
        raise EvaluationError("the curve has no points; evaluate at least one threshold")
    if not np.isfinite(pts).all():
        raise EvaluationError("the curve has NaN or infinite points; every point needs a measured % and accuracy")
    return pts[np.argsort(pts[:, 0], kind="stable")]


def pct_zeroed_within_1pt(points, base: float, tolerance: float = WITHIN_POINTS) -> float:
    """x of the LAST crossing of the piecewise-linear curve with accuracy = base - tolerance, 0 if none.

    As the paper's authors compute it: a crossing is a point lying exactly on the line (at its x) or a
    segment whose ends lie strictly on both sides of it (x linearly interpolated). So a curve that ends
    exactly on the line gives that end's x: (0,80),(10,79.5),(20,79.2),(30,79.0) with base 80 gives 30.
    """
    pts = _sorted_points(points)
    d = pts[:, 1] - (float(base) - tolerance)  # [n] distance above the line
    for i in range(len(pts) - 1, -1, -1):
        if d[i] == 0:
            return float(pts[i, 0])
        if i > 0 and d[i - 1] * d[i] < 0:
            (x0, _), (x1, _) = pts[i - 1], pts[i]
            return float(x0 + d[i - 1] / (d[i - 1] - d[i]) * (x1 - x0))
    return 0.0


def normalised_auc(points) -> float:
    """Trapezoid area under the curve / (max x - min x); NaN when all points share one x."""
    pts = _sorted_points(points)
    width = pts[-1, 0] - pts[0, 0]
    if width == 0:
        return float("nan")
    area = float(np.sum((pts[1:, 0] - pts[:-1, 0]) * (pts[1:, 1] + pts[:-1, 1]) / 2.0))
    return area / float(width)


def task_average_curve(curves: dict) -> tuple[tuple[tuple[float, float], ...], float]:
    """The average across tasks: `curves` maps task -> (quantiles, points, base accuracy), every task swept at
    the same quantiles; returns ((mean % zeroed, mean accuracy) per quantile, mean base accuracy)."""
    if not curves:
        raise EvaluationError("no task curves to average; evaluate at least one task")
    tasks = list(curves)
    quantiles = [tuple(float(q) for q in curves[t][0]) for t in tasks]
    for task, qs in zip(tasks[1:], quantiles[1:]):
        if qs != quantiles[0]:
            raise EvaluationError(
                f"{task} was swept at quantiles {list(qs)} and {tasks[0]} at {list(quantiles[0])}: the average "
                "across tasks needs the same quantiles in every task; evaluate them with the same --quantiles"
            )
    pts = np.array([np.asarray(curves[t][1], dtype=np.float64).reshape(-1, 2) for t in tasks])  # [task, q, 2]
    if pts.shape[1] != len(quantiles[0]):
        raise EvaluationError("every curve needs one point per quantile")
    mean = pts.mean(axis=0)  # [q, 2]
    base = float(np.mean([float(curves[t][2]) for t in tasks]))
    return tuple((float(x), float(y)) for x, y in mean), base
