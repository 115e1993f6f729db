"""Budgeted search (`track --budget N`): which checkpoints of a selection to score when at most N may be, no I/O.

A coarse pass first (`coarse_pass`: log-spaced in tokens, first and last included, the same rule as `--max`),
then refinement (`next_refinements`): between two scored neighbours whose dormancy differs, score the middle
available checkpoint, the interval that most needs it first, until every change lies between adjacent
available checkpoints or the budget is spent. Every choice is a function of the available checkpoints, which
of them are scored and what their masks and rates are, so a rerun over the same store continues where an
interrupted one stopped and ends with the same checkpoints.
"""

from __future__ import annotations

from dormant_tasks.checkpoints import log_spread


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
