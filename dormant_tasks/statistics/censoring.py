"""Times known only up to an interval: a head settles dormant somewhere after the last scored checkpoint before the
one where it is seen, when the run left checkpoints unscored between them (`track --budget`, `--max`, `--every`).

Each time t_h lies in [low_h, high_h] (low = high: resolved to a checkpoint; +inf at both ends: not reached by the
end, right-censored). The median is monotone in every value, so whatever the times inside the intervals are, their
median lies between the median of the lower ends and the median of the upper ends; the same holds in every
bootstrap resample drawn from the same heads. `interval_median_estimate` states the midpoint median with the
interval from the lower percentile of the lower ends' bootstrap medians to the upper percentile of the upper ends'
(the expanded percentile interval of `layered_estimate`):
it covers the median of the true times at least as often as the bootstrap of the true times would (docs/SCORES.md
§7, "Interval-censored times"). With every interval a point it is `median_estimate`, number for number.
"""

from __future__ import annotations

import numpy as np

from dormant_tasks.statistics.estimates import (
    MIN_UNITS,
    Estimate,
    Resampling,
    bootstrap_interval,
    cluster_bootstrap,
    lower_median,
    median_estimate,
    n_layers,
)

INTERVAL_CENSORED = "interval-censored: the median of the intervals' midpoints; the 95% interval spans the bootstrap medians of their lower and upper ends"


def median_bounds(low: np.ndarray, high: np.ndarray) -> tuple[float, float]:
    """The least and the greatest (lower) median of times that lie in [low, high] each: the medians of the ends."""
    return lower_median(low), lower_median(high)


def interval_median_estimate(
    low: np.ndarray, high: np.ndarray, layer: np.ndarray, resampling: Resampling, stream: int, unit: str
) -> Estimate:
    """The (lower) median of per-head times known to lie in [low, high] ([head] each; +inf at both ends: right-
    censored), with the two-stage bootstrap over layers carried through both ends (the same resamples): value the
    median of the midpoints, low the lower percentile of the lower ends' medians, high the upper percentile of the
    upper ends' (the expanded percentile interval of `layered_estimate`). Every interval a point: `median_estimate` itself."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    if np.array_equal(low, high):
        return median_estimate(high, layer, resampling, stream, unit)
    method = f"{INTERVAL_CENSORED}; {resampling.method}"
    if not low.size:
        return Estimate.undefined(method, unit, 0)
    finite = high[np.isfinite(high)]
    last = float(finite.max()) if finite.size else 0.0
    big = (last + 1.0) * 2.0  # the +inf stand-in of `median_estimate`

    def tame(x: np.ndarray) -> np.ndarray:
        return np.where(np.isinf(x), big, x)

    def back(x: float) -> float:
        return float("inf") if x > last else x

    lo, hi = tame(low), tame(high)
    value = back(lower_median((lo + hi) / 2))
    units = n_layers(layer)
    if units < MIN_UNITS:
        return Estimate(value, float("nan"), float("nan"), method, unit, units)
    picks = cluster_bootstrap(layer, resampling, stream)
    low_end = bootstrap_interval(np.array([lower_median(lo[i]) for i in picks]), units)[0]  # as `median_estimate`
    high_end = bootstrap_interval(np.array([lower_median(hi[i]) for i in picks]), units)[1]
    return Estimate(value, back(low_end), back(high_end), method, unit, units)
