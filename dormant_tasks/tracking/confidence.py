"""How sure a head's dormancy is: a 95% interval for its `dormant_rate` (docs/SCORES.md, "Confidence").

A head's `dormant_rate` is k/n: it was inactive on k of the n calibration inputs. The mask (`dormant`:
rate >= 0.5) is an estimate, and a head whose rate sits near 0.5 can flip between two checkpoints by the
luck of the inputs alone. The Wilson score interval says which rates are consistent with k of n: a head
whose interval excludes 0.5 is dormant (or active) with confidence.
"""

from __future__ import annotations

import numpy as np

Z95 = 1.959963984540054  # the 97.5% quantile of the standard normal: a two-sided 95% interval


def wilson_interval(k, n, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval (low, high) of a proportion from k successes of n trials, elementwise.

    p = k/n; centre = (p + z²/(2n)) / (1 + z²/n); half = z·sqrt(p(1−p)/n + z²/(4n²)) / (1 + z²/n);
    (low, high) = (centre − half, centre + half), clipped to [0, 1] against rounding. n = 0 (or a NaN k or
    n) gives (nan, nan). Scalars give 0-d arrays; `float(low)` reads them.
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k, n = np.broadcast_arrays(k, n)
    ok = n > 0  # False for NaN too
    safe_n = np.where(ok, n, 1.0)
    p = np.where(ok, k, 0.0) / safe_n
    z2 = z * z
    denom = 1.0 + z2 / safe_n
    centre = (p + z2 / (2.0 * safe_n)) / denom
    half = z * np.sqrt(np.maximum(p * (1.0 - p) / safe_n + z2 / (4.0 * safe_n * safe_n), 0.0)) / denom
    low = np.where(ok, np.clip(centre - half, 0.0, 1.0), np.nan)
    high = np.where(ok, np.clip(centre + half, 0.0, 1.0), np.nan)
    return low, high


def excludes_half(low, high) -> np.ndarray:
    """int8, elementwise: 1 when the interval lies wholly above or below 0.5, 0 when it holds 0.5, -1 when
    it is unknown (NaN, e.g. a row upgraded from schema version 3)."""
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    known = ~(np.isnan(low) | np.isnan(high))
    with np.errstate(invalid="ignore"):
        sure = (low > 0.5) | (high < 0.5)
    return np.where(known, sure.astype(np.int8), np.int8(-1)).astype(np.int8)
