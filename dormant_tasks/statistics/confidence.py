"""How sure a head's dormancy is: a 95% interval for its `dormant_rate` (docs/SCORES.md, "Confidence").

A head's `dormant_rate` is k/n: it was inactive on k of the n calibration inputs. The mask (`dormant`:
rate >= 0.5) is an estimate, and a head whose rate sits near 0.5 can flip between two checkpoints by the
luck of the inputs alone. The Wilson score interval says which rates are consistent with k of n: a head
whose interval excludes 0.5 is dormant (or active) with confidence.

A transition compares one head at two checkpoints on the SAME calibration inputs: the samples are paired,
so whether it is confident is a paired test on the inputs whose indicator changed (the exact McNemar test,
`mcnemar_exact_p`), not a comparison of two independent intervals. The store keeps each head's per-input
indicators packed into bits for it (`pack_inputs`); results stored without them fall back to the intervals.
McNemar's p answers "did the rate move between these two checkpoints" and is stored uncorrected beside each mask
change; whether a change is confident is decided by confident states (`cluster_states.decide_states`, from the
per-input indicators and their clusters; `states.state_transitions` where a result keeps no indicators), with
Benjamini-Hochberg or -Yekutieli q-values over heads (`bh_qvalues`).
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
    # k = 0 and k = n put an end exactly at 0 and 1 (the formula gets there only up to rounding, e.g. 5.6e-17)
    low = np.where(ok, np.where(p <= 0.0, 0.0, np.clip(centre - half, 0.0, 1.0)), np.nan)
    high = np.where(ok, np.where(p >= 1.0, 1.0, np.clip(centre + half, 0.0, 1.0)), np.nan)
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


# ------------------------------------------------------------------------ paired: one head at two checkpoints


def pack_inputs(inactive: np.ndarray) -> list[bytes]:
    """Per head, its per-input inactive indicators as bytes: bit i (little-endian within each byte) is input i.

    inactive: bool [input, head] (any trailing shape is flattened into heads). The store keeps these
    (`head_scores.inactive_inputs`) so that the same inputs can be compared at two checkpoints; 128 inputs
    take 16 bytes a head.
    """
    inactive = np.asarray(inactive, dtype=bool)
    flat = inactive.reshape(inactive.shape[0], -1)  # [input, head]
    packed = np.packbits(flat, axis=0, bitorder="little").T  # [head, byte]
    return [row.tobytes() for row in np.ascontiguousarray(packed)]


def unpack_inputs(packed: bytes, n_inputs: int | None = None) -> np.ndarray:
    """bool [input]: the indicators `pack_inputs` wrote (the padding bits of the last byte dropped when
    `n_inputs` is given; they are 0, so they never count as discordant anyway)."""
    bits = np.unpackbits(np.frombuffer(packed, dtype=np.uint8), bitorder="little").astype(bool)
    return bits if n_inputs is None else bits[:n_inputs]


def discordant(before: bytes, after: bytes) -> tuple[int, int]:
    """(b, c): inputs on which the head was inactive before and not after (b), and not before but after (c)."""
    x, y = np.frombuffer(before, dtype=np.uint8), np.frombuffer(after, dtype=np.uint8)
    if x.size != y.size:
        raise ValueError(f"indicators of {8 * x.size} and {8 * y.size} inputs: not the same calibration set")
    b = int(np.unpackbits(x & ~y).sum())
    c = int(np.unpackbits(~x & y).sum())
    return b, c


def mcnemar_exact_p(b, c) -> np.ndarray:
    """Two-sided exact McNemar p-value, elementwise: under "no change" each of the n = b + c discordant inputs
    is equally likely to go either way, so min(b, c) ~ Binomial(n, 1/2) and p = min(1, 2 P(X <= min(b, c))).

    n = 0 (no discordant input: the head's indicators did not change) gives p = 1. Exact integer sums
    (`math.comb`), one per distinct (n, min) pair.
    """
    from math import comb

    b = np.asarray(b, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    b, c = np.broadcast_arrays(b, c)
    n, m = b + c, np.minimum(b, c)
    out = np.ones(n.shape, dtype=np.float64)
    cache: dict[tuple[int, int], float] = {}
    for idx in np.ndindex(n.shape):
        key = (int(n[idx]), int(m[idx]))
        if key not in cache:
            nn, mm = key
            tail = sum(comb(nn, k) for k in range(mm + 1))
            cache[key] = min(1.0, 2 * tail / 2**nn) if nn else 1.0  # int / int: exact, no float overflow
        out[idx] = cache[key]
    return out


def bh_qvalues(p, m: int | None = None, method: str = "bh") -> np.ndarray:
    """Benjamini-Hochberg q-values of the p-values `p` (float, any shape; NaN: no test, q NaN) in a family of
    `m` tests (default: the non-NaN p's); `method="by"` gives Benjamini-Yekutieli's (BH's times sum_{i<=m} 1/i).
    m larger than the p's given counts the family's other tests at p = 1: they sort last, so each q is the
    q-value of the whole family with those p's replaced by 1, which is never below the q of their true p's (the
    rule stays valid, a little conservative).

    q_(i) = min over j >= i of min(1, m p_(j) / j), p sorted ascending with rank i = 1..: rejecting every test
    with q <= level is the step-up procedure at that level. The arithmetic is scipy's
    (`scipy.stats.false_discovery_control`); this wrapper adds the NaNs and the family size.
    """
    from scipy.stats import false_discovery_control

    p = np.asarray(p, dtype=np.float64)
    flat = p.ravel()
    known = np.flatnonzero(~np.isnan(flat))
    n = known.size
    m = n if m is None else int(m)
    if m < n:
        raise ValueError(f"a family of {m} tests cannot hold {n} p-values")
    q = np.full(flat.shape, np.nan)
    if n:
        family = np.concatenate([flat[known], np.ones(m - n)])  # the family's untested members at p = 1
        q[known] = false_discovery_control(family, method=method)[:n]
    return q.reshape(p.shape)
