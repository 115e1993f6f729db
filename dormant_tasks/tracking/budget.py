"""Budgeted search (`track --budget N`): which checkpoints of a selection to score when at most N may be, no I/O.

A coarse pass first (`coarse_pass`: log-spaced in tokens, first and last included, the same rule as `--max`),
then refinement (`next_refinements`): between two scored neighbours whose dormancy differs, score the middle
available checkpoint, the interval that most needs it first, until every change lies between adjacent
available checkpoints or the budget is spent. Every choice is a function of the available checkpoints, which
of them are scored and what their masks and rates are, so a rerun over the same store continues where an
interrupted one stopped and ends with the same checkpoints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from dormant_tasks.checkpoints import Revision, log_spread, step_tokens, training_positions


def coarse_pass(tokens: list[int] | list[float], n: int, one_step: float | None = None) -> list[int]:
    """The indices (sorted) into the available checkpoints (`tokens`: their training positions, increasing) of
    the coarse pass of `n` checkpoints: log-spaced in tokens + `one_step` (default: the smallest gap between
    two available checkpoints), the first and the last included; deterministic (ties to the earlier one)."""
    if n < 1 or not tokens:
        return []
    if one_step is None:
        gaps = [b - a for a, b in zip(tokens, tokens[1:]) if b > a]
        one_step = min(gaps, default=1)
    return log_spread(list(tokens), n, max(float(one_step), 1e-12))


def available_positions(revisions: list[Revision]) -> tuple[list[int], float]:
    """The training positions (tokens seen) of a selection's checkpoints in series order, never decreasing (`main`,
    whose tokens are unknown, at its predecessor's), and one step's tokens: the axis of `coarse_pass`."""
    positions = np.maximum.accumulate(np.asarray(training_positions(revisions) or [0], dtype=np.int64))
    return positions.tolist()[: len(revisions)], step_tokens(revisions)


# The share of a budget that the coarse pass takes: enough points that a change early in training (where they
# are dense) has a scored neighbour on each side, the rest left to follow the changes the pass finds. Chosen
# among 0.25 to 0.6 on benchmarks/budgeted_search.py's synthetic truth and dense tiny series.
COARSE_SHARE = 0.3
# A head whose state is the same at both ends of an interval still asks for refinement when its dormant rate
# moved by more than this: a rate on its way across 0.5, or one that went and came back inside (0.15 to 0.5
# compared on the same benchmark: lower values located fewer of the dense tiny series' changes to adjacent
# checkpoints).
MOVED = 0.4


def coarse_size(budget: int, n_available: int) -> int:
    """How many checkpoints of a `budget` the coarse pass takes (first and last at least)."""
    return min(n_available, budget, max(2, math.ceil(COARSE_SHARE * budget)))


def first_pass(tokens: list[int] | list[float], budget: int, scored, one_step: float | None = None) -> list[int]:
    """The coarse pass's indices still to score, in order, given the indices already `scored` (they count
    against the budget): empty once the budget is spent."""
    room = budget - len(set(scored))
    todo = [i for i in coarse_pass(tokens, coarse_size(budget, len(tokens)), one_step) if i not in set(scored)]
    return todo[: max(0, room)]


def interval_need(rates_a: np.ndarray, rates_b: np.ndarray) -> float:
    """How much the interval between two scored checkpoints asks for refinement: over every head (and score
    function), the rate's move |b - a| where the dormancy mask (rate >= 0.5) differs, plus its move past `MOVED`
    where it does not. A head near 0.5 that flips adds little; a head that went from awake to dormant adds
    nearly 1. 0: nothing to locate in it."""
    a, b = np.asarray(rates_a, dtype=float).ravel(), np.asarray(rates_b, dtype=float).ravel()
    return float(_needs(a[None], b[None])[0])


def _needs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`interval_need` of each row pair: a, b [interval, head]; nan (a head one end lacks) adds nothing."""
    move = np.abs(b - a)
    flipped = (a >= 0.5) != (b >= 0.5)
    return np.nansum(np.where(flipped, move, np.maximum(move - MOVED, 0.0)), axis=1)


def _middle(lo: int, hi: int, blocked) -> int | None:
    """The available checkpoint nearest the middle of (lo, hi), not `blocked` (ties: the earlier), or None."""
    inside = (i for i in range(lo + 1, hi) if i not in blocked)
    return min(inside, key=lambda i: (abs(2 * i - lo - hi), i), default=None)


def next_refinements(
    tokens: list[int] | list[float],
    rates: Mapping[int, np.ndarray],
    k: int,
    resolution: float | None = None,
    skip=(),
) -> list[int]:
    """The next `k` (at most) indices into the available checkpoints to score, the neediest interval first.

    `tokens`: the available checkpoints' training positions (increasing); `rates`: {index of a scored
    checkpoint: its dormant rates, any shape, the same for all (e.g. [function, layer, head])}; `resolution` R:
    an interval whose end has at most (1 + R) times its start's tokens is located enough; `skip`: indices not to
    choose (they failed this run). An interval between two neighbouring scored checkpoints is refined when it
    holds an unscored one and `interval_need` > 0; its priority is that need times the square root of its width
    in available checkpoints: a change in a wide interval leaves a wide gap, and one in a narrow interval is
    nearly located (on the benchmark's synthetic truth the square root located more changes to adjacent
    checkpoints than the width or its log did). Ties go to the
    earlier interval, so the choice is a function of its arguments alone. Empty: every change is located."""
    done = sorted(rates)
    if len(done) < 2 or k < 1:
        return []
    lo, hi = np.array(done[:-1]), np.array(done[1:])
    stack = np.stack([np.asarray(rates[i], dtype=float).ravel() for i in done])  # [scored, head]
    need = _needs(stack[:-1], stack[1:])  # [interval]
    open_ = (hi - lo >= 2) & (need > 0)
    if resolution is not None:
        at = np.asarray(tokens, dtype=float)
        open_ &= at[hi] > (1 + resolution) * at[lo]
    priority = need * np.sqrt(hi - lo)
    picks: list[int] = []
    for j in sorted(np.flatnonzero(open_), key=lambda j: (-priority[j], lo[j])):
        middle = _middle(int(lo[j]), int(hi[j]), set(skip))
        if middle is not None:
            picks.append(middle)
        if len(picks) == k:
            break
    return picks


def search_done(
    tokens: list[int] | list[float],
    budget: int,
    rates: Mapping[int, np.ndarray],
    resolution: float | None = None,
    one_step: float | None = None,
) -> bool:
    """Whether `budgeted_search` from these scored checkpoints would score nothing more: the coarse pass is
    scored and the budget is spent or every change located."""
    if first_pass(tokens, budget, rates, one_step):
        return False
    return len(rates) >= budget or not next_refinements(tokens, rates, 1, resolution)


def budgeted_search(
    tokens: list[int] | list[float],
    budget: int,
    score: Callable[[list[int]], Mapping[int, np.ndarray | None]],
    rates: Mapping[int, np.ndarray] | None = None,
    at_once: int = 1,
    resolution: float | None = None,
    one_step: float | None = None,
) -> dict[int, np.ndarray]:
    """The whole search: the coarse pass, then rounds of `at_once` refinements, until nothing needs refining or
    `budget` checkpoints are scored (those in `rates`, scored before, count). `score(indices)` scores them and
    returns {index: rates, or None when it failed} (a failed one is not chosen again, nor counted). Returns the
    rates of every scored checkpoint. The same arguments and scores give the same checkpoints, and a search
    that starts from the rates an interrupted one stored ends where the whole one did (one at a time)."""
    known: dict[int, np.ndarray] = dict(rates or {})
    failed: set[int] = set()

    def take(indices: list[int]) -> None:
        for i, r in score(indices).items():
            if r is None:
                failed.add(i)
            else:
                known[i] = r

    pending = first_pass(tokens, budget, known, one_step)
    while pending:  # known in advance: taken whole (the local runner downloads the next while one is scored)
        take(pending)
        pending = [i for i in first_pass(tokens, budget, known, one_step) if i not in failed]
    while len(known) < budget:
        picks = next_refinements(tokens, known, min(at_once, budget - len(known)), resolution, failed)
        if not picks:
            break
        take(picks)
    return known
