"""A `--budget` run's checkpoints: the budgeted search (`budget.budgeted_search`) over a series' selection, its
choices read from the store between rounds. The runner is the caller's: `run(revisions)` computes and writes
those checkpoints (a run's executor: in this process, or the flow's tasks) and returns their results."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dormant_tasks.checkpoints import Revision
from dormant_tasks.tracking.budget import available_positions, budgeted_search
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import CheckpointResult
from dormant_tasks.tracking.tracker import stored_rates


def run_budgeted(
    request: TrackRequest,
    selected,
    pending,
    run: Callable[[list[Revision]], list[CheckpointResult]],
    at_once: int = 1,
) -> list[Revision]:
    """Score checkpoints of `selected` (series order) until `request.budget` of them are stored or every change
    is located, `at_once` a round after the coarse pass; the selected ones not `pending` are stored already and
    count. Each round's checkpoints go to `run`, and the next round is chosen from what the store then holds, so
    the choices depend on the store and the request alone: a rerun continues where a killed run stopped.
    Returns the scored checkpoints of the selection, in series order."""
    available = list(selected)
    positions, one_step = available_positions(available)
    at = {r.name: i for i, r in enumerate(available)}
    waiting = set(pending)
    stored = stored_rates(request, [r for r in available if r not in waiting])

    def score(indices: list[int]) -> dict[int, np.ndarray | None]:
        results = run([available[i] for i in indices])
        rates = stored_rates(request, [r.revision for r in results if r.failed is None])
        return {at[r.revision.name]: rates.get(r.revision.name) for r in results}

    scored = budgeted_search(
        positions,
        request.budget or len(available),
        score,
        {at[n]: v for n, v in stored.items()},
        at_once,
        request.resolution,
        one_step,
    )
    return [available[i] for i in sorted(scored)]
