"""The track flow: `dormant_tasks.run.run_track` with Prefect's task runner as its executor.

The run's sequence (state -> audit -> taus -> checkpoints -> derive -> report) is the library's; the flow's
executor (`flows.executor.PrefectTasks`) makes each checkpoint a task (`flows.tasks`: retries, task runs
recorded) on the flow's task runner, which the caller chooses (`flows.runners.task_runner`: a thread pool
locally, `DaskTaskRunner` on a cluster), and the run's progress and report Prefect artifacts.
"""

from __future__ import annotations

from prefect import flow

from dormant_tasks.run import run_track
from dormant_tasks.tracking import SeriesState, TrackRequest, TrackResult
from flows.executor import PrefectTasks


@flow(name="track", log_prints=True, validate_parameters=False)
def track(request: TrackRequest, progress: bool = False, state: SeriesState | None = None) -> TrackResult:
    """Track dormant heads through a series of checkpoints (`dormant_tasks.run.run_track`); returns its
    `TrackResult`. `request` is a `TrackRequest` (or its dict, as a deployment passes it); `state` the series'
    state when the caller asked for it already, holding the series."""
    request = state.request if isinstance(state, SeriesState) else TrackRequest.coerce(request)
    return run_track(request, PrefectTasks(request), state=state, progress=progress)
