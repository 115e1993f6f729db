"""The leaderboard metric (docs/SCORES.md §6): "% of heads zeroed within 1 point", the normalised AUC, the warnings
of a curve, and the across-task average curve. A curve is a list of (x = measured % of heads zeroed, y = accuracy
in %) points, one per threshold.
"""

from __future__ import annotations

import math

import numpy as np

from dormant_tasks.errors import EvaluationError

WITHIN_POINTS = 1.0  # the leaderboard's tolerance: one absolute accuracy point (in %)
AVERAGE_TASK = "average"  # the label of the across-task average curve in tables
AUC_UNIT = "mean accuracy %"  # what the normalised AUC is, printed beside every "AUC"
NEVER_WITHIN = "never within 1 point"  # every point lies below base - 1 point: the authors' 0 is no measurement
WITHIN_THROUGHOUT = "within 1 point throughout"  # every point lies above it: at least the largest % swept, not 0
WARNED = " (!)"  # after a value whose curve has a warning (the `evaluations.warnings` column), explained below it


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
    """x of the LAST crossing of the piecewise-linear curve with accuracy = base - tolerance, 0 if none; a point lying
    exactly on the line crosses at its x (the authors' `get_intersection`; docs/SCORES.md §6 has the example)."""
    pts = _sorted_points(points)
    d = pts[:, 1] - (float(base) - tolerance)  # [n] distance above the line
    for i in range(len(pts) - 1, -1, -1):
        if d[i] == 0:
            return float(pts[i, 0])
        if i > 0 and d[i - 1] * d[i] < 0:
            (x0, _), (x1, _) = pts[i - 1], pts[i]
            return float(x0 + d[i - 1] / (d[i - 1] - d[i]) * (x1 - x0))
    return 0.0


def pct_zeroed_within_1pt_many(x, y, base, tolerance: float = WITHIN_POINTS) -> np.ndarray:
    """`pct_zeroed_within_1pt` of many curves that share their x: [curve] values of the curves y [curve, point]
    (accuracy %, in the order of x) against base [curve]; the same rule and arithmetic, one loop over points."""
    x = np.asarray(x, dtype=np.float64)  # [point]
    order = np.argsort(x, kind="stable")
    x = x[order]
    y = np.asarray(y, dtype=np.float64).reshape(-1, len(x))[:, order]  # [curve, point]
    d = y - (np.asarray(base, dtype=np.float64).reshape(-1, 1) - tolerance)  # [curve, point] distance above the line
    out = np.zeros(len(d))  # [curve]: 0 where no crossing is found
    found = np.zeros(len(d), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(len(x) - 1, -1, -1):
            touch = ~found & (d[:, i] == 0)
            out[touch] = x[i]
            found |= touch
            if i > 0:
                cross = ~found & (d[:, i - 1] * d[:, i] < 0)
                d0, d1 = d[cross, i - 1], d[cross, i]
                out[cross] = x[i - 1] + d0 / (d0 - d1) * (x[i] - x[i - 1])
                found |= cross
    out[np.isnan(d).any(axis=1)] = np.nan  # a resample without items of a setting
    return out


def never_crossed(points, base: float, tolerance: float = WITHIN_POINTS) -> str | None:
    """Why a curve's "% zeroed within 1 point" is the authors' 0 without being a crossing at 0: NEVER_WITHIN when
    every point lies below base - tolerance (zeroing any share costs more than a point, even the smallest
    swept), WITHIN_THROUGHOUT when every point lies above it (no share swept costs a point); None otherwise."""
    pts = _sorted_points(points)
    d = pts[:, 1] - (float(base) - tolerance)  # [n] distance above the line
    if (d < 0).all():
        return NEVER_WITHIN
    if (d > 0).all():
        return WITHIN_THROUGHOUT
    return None


def within_text(value: float, never: str | None = None) -> str:
    """The value as every view shows it: "never within 1 point" or "within 1 point throughout" instead of the
    authors' 0.00 when the curve never crossed the line (`never_crossed`), else the value to 2 decimals."""
    if never:
        return never
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def recovery_note(points, base: float, tolerance: float = WITHIN_POINTS) -> str | None:
    """A warning when the curve falls below base - tolerance and later rises back to or above it: its "% zeroed
    within 1 point" (the LAST crossing) then lies past a dip, an artefact of noise rather than the point where
    zeroing first cost a point. None for a curve that, once below the line, stays below."""
    pts = _sorted_points(points)
    d = pts[:, 1] - (float(base) - tolerance)  # [n] distance above the line
    below = np.flatnonzero(d < 0)
    if len(below) == 0:
        return None
    first = int(below[0])
    back = np.flatnonzero(d[first + 1 :] >= 0)
    if len(back) == 0:
        return None
    j = first + 1 + int(back[-1])
    return (
        f"non-monotone curve: accuracy falls to {pts[first, 1]:.1f}% at {pts[first, 0]:.1f}% zeroed, below base - "
        f"{tolerance:g} point, and rises back to {pts[j, 1]:.1f}% at {pts[j, 0]:.1f}%, so its last crossing (% zeroed "
        "within 1 point) lies past a dip"
    )


def normalised_auc(points) -> float:
    """Trapezoid area under the curve / (max x - min x): the mean accuracy over the swept range, in % (AUC_UNIT);
    NaN when all points share one x."""
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


def chance_band_pct(chance: float, n_items: int) -> tuple[float, float]:
    """(chance %, half-width in points) of the two-sided 95% band of a uniform guesser's accuracy on n items: the normal
    approximation 1.96 * sqrt(p (1 - p) / n), within one item of the exact binomial quantiles for n from 10 to 1,267."""
    return 100.0 * chance, 100.0 * 1.96 * math.sqrt(chance * (1.0 - chance) / n_items)


def chance_note(task: str, n_items: int, base_accuracy_pct: float, chance: float | None) -> str | None:
    """A warning when the un-intervened accuracy cannot be told from guessing on this many items: a
    leaderboard of such a model ranks noise, not how many heads it can spare. None otherwise (and for a
    task without a chance level, `chance` None: generation)."""
    if chance is None or not n_items:
        return None
    pct, half = chance_band_pct(chance, n_items)
    if abs(base_accuracy_pct - pct) > half:
        return None
    return (
        f"base accuracy {base_accuracy_pct:.2f}% is within the 95% binomial noise of chance for {task} "
        f"({pct:.3g}% +/- {half:.2f} points on {n_items} items): the model may be guessing, so the leaderboard "
        f"ranks noise; evaluate a trained checkpoint, or more items if --limit held them back"
    )


def curve_warnings(task: str, n_items: int, chance: float | None, points, base_pct: float) -> list[str]:
    """The warnings that travel with a curve's numbers (stored in `evaluations.warnings`, shown by the leaderboard
    and the report): a base accuracy within chance noise, a curve that dips below base - 1 point and recovers."""
    notes = [chance_note(task, n_items, base_pct, chance), recovery_note(points, base_pct) if len(points) else None]
    return [n for n in notes if n]


def mark_warnings(rows: list[dict]) -> None:
    """Set `warnings` ("; "-joined, None when none) on every `evaluations` row, per (task, mode, function) curve."""
    curves: dict[tuple, list[dict]] = {}
    for r in rows:
        curves.setdefault((r["task"], r["mode"], r["score_fn"]), []).append(r)
    for (task, mode, _), of_curve in curves.items():
        points = [(100.0 * r["frac_zeroed"], 100.0 * r["accuracy"]) for r in of_curve] if mode == "dynamic" else []
        first = of_curve[0]
        found = curve_warnings(task, first["n_items"], first.get("chance"), points, 100.0 * first["base_accuracy"])
        for r in of_curve:
            r["warnings"] = "; ".join(found) or None
