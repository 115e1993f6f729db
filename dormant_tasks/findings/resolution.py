"""How finely the findings' times are located, from the series' listing (`tracking.Resolution`): a change or a
settling time seen at a scored checkpoint happened after the scored checkpoint before it; when the run left listed
checkpoints unscored between the two (`track --budget`, `--max`, `--every`), the time is only known to lie in that
interval (interval-censored), and a confident transition is said with its pair: "between 117B and 264B tokens: 3
checkpoints unscored". Every checkpoint scored: every time is a point, and nothing changes but a line that says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Unresolved:
    """A pair of scored checkpoints with confident transitions between them and listed checkpoints unscored."""

    from_revision: str
    to_revision: str
    from_tokens: int
    to_tokens: int
    unscored: int  # listed, available, not scored, strictly between the two
    n_confident: int  # confident transitions located between them


@dataclass(frozen=True)
class ChangeResolution:
    """Of the confident transitions: how many are resolved to adjacent checkpoints, and the pairs that are not.
    `known` False: the store keeps no listing of the series (tracked before it was recorded): unknown."""

    known: bool
    n_confident: int
    n_resolved: int | None  # 0 unscored between their pair (None when unknown)
    unresolved: tuple[Unresolved, ...]  # in series order
    n_unknown: int = 0  # whose pair the listing cannot place (a revision it lacks)


def change_resolution(transitions, confident: np.ndarray, resolution) -> ChangeResolution:
    """`transitions`: the function's transitions table (from/to revision and tokens); `confident`: bool [row];
    `resolution`: the series' `tracking.Resolution`."""
    rows = [r for r, c in zip(transitions.to_pylist(), confident.tolist()) if c]
    if not resolution.known:
        return ChangeResolution(False, len(rows), None, ())
    pairs: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        pairs.setdefault((r["from_revision"], r["to_revision"]), []).append(r)
    resolved, unknown, open_pairs = 0, 0, []
    for (a, b), group in pairs.items():
        n = resolution.unscored_between(a, b)
        if n is None:
            unknown += len(group)
        elif n == 0:
            resolved += len(group)
        else:
            g = group[0]
            open_pairs.append(Unresolved(a, b, int(g["from_tokens"]), int(g["to_tokens"]), n, len(group)))
    order = {r: i for i, r in enumerate(resolution.revisions)}
    open_pairs.sort(key=lambda u: (order.get(u.to_revision, -1), order.get(u.from_revision, -1)))
    return ChangeResolution(True, len(rows), resolved, tuple(open_pairs), unknown)


def lower_ends(
    at: np.ndarray, path: np.ndarray, revision: np.ndarray, tokens: np.ndarray, resolution
) -> tuple[np.ndarray, int | None]:
    """(float64 [head] the lower end of each time, the number of them that are intervals; None: unknown).

    `at`: [head] the position on `path` (checkpoint indices from the first one) at which each head's time is seen;
    its upper end is that checkpoint's `tokens`. With listed checkpoints unscored between it and the scored one
    before it on the path, the time lies after that one: its tokens are the lower end. Otherwise (resolved, the
    first checkpoint, or the listing unknown) the time is the point."""
    at = np.asarray(at, dtype=np.int64)
    high = tokens[path[at]].astype(np.float64) if at.size else np.zeros(0)
    low = high.copy()
    if not resolution.known:
        return low, None
    n_open = 0
    for i, pos in enumerate(at.tolist()):
        if pos == 0:
            continue
        earlier, later = path[pos - 1], path[pos]
        if resolution.unscored_between(str(revision[earlier]), str(revision[later])):
            low[i] = float(tokens[earlier])
            n_open += 1
    return low, n_open
