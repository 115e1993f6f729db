"""The track flow: `dormant_tasks.run.run_track` with Prefect's task runner as its executor.

The run's sequence (state -> audit -> taus -> checkpoints -> derive -> report) is the library's; the flow's
executor (`PrefectTasks`) makes each checkpoint a task (`flows.tasks`: retries, task runs
recorded) on the flow's task runner, which the caller chooses (`flows.runners.task_runner`: a thread pool
locally, `DaskTaskRunner` on a cluster), and the run's progress and report Prefect artifacts.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow

from dormant_tasks import cluster
from dormant_tasks.run import Executor, computed_now, run_track
from dormant_tasks.tracking import SeriesState, TrackRequest, TrackResult, checkpoint_outcome
from flows import runners

PROGRESS_EVERY_S = 5.0  # an artifact update is an API round trip: at most one every few seconds, and the last


@flow(name="track", log_prints=True, validate_parameters=False)
def track(request: TrackRequest, progress: bool = False, state: SeriesState | None = None) -> TrackResult:
    """Track dormant heads through a series of checkpoints (`dormant_tasks.run.run_track`); returns its
    `TrackResult`. `request` is a `TrackRequest` (or its dict, as a deployment passes it); `state` the series'
    state when the caller asked for it already, holding the series."""
    request = state.request if isinstance(state, SeriesState) else TrackRequest.coerce(request)
    return run_track(request, PrefectTasks(request), state=state, progress=progress)


class PrefectTasks(Executor):
    """A run's checkpoint work as Prefect tasks on the flow's task runner. Outside a flow run (`dormant track`),
    `run` starts the flow on the request's task runner; inside it (the flow's body), the work runs there."""

    def __init__(self, request: TrackRequest) -> None:
        super().__init__()
        self.request = request
        self.window, self.prefetch = runners.window(request), runners.prefetches(request)
        self._artifact: Any = None  # the progress artifact's id, once created
        self._updated = 0.0

    @property
    def log(self):
        from prefect import get_run_logger

        return get_run_logger()

    def run(self, request, state, work):
        from prefect.context import FlowRunContext

        if FlowRunContext.get() is not None:  # the flow's body: the work runs here
            return work(self)
        from flows.session import start_prefect

        if request.address:  # before Prefect starts: a scheduler that does not answer costs seconds
            cluster.check_scheduler(request.address)
        start_prefect()
        return track.with_options(task_runner=runners.task_runner(request))(request, progress=True, state=state)

    def score(self, request, revision):
        from flows import tasks

        with runners.submitting(request):
            future = tasks.score_checkpoint.submit(request, revision)
        with runners.waiting(request):
            return runners.checkpoint_result(future)

    def compute(self, request, revision, series):
        from flows import tasks

        if self.window == 1:  # one at a time: the task runs in the flow's thread, where Ctrl-C stops it at once (a
            return computed_now(tasks.compute_checkpoint, request, revision, series)  # pool's thread is waited for)
        with runners.submitting(request):
            return tasks.compute_checkpoint.submit(request, revision, series)

    def fetch(self, request, revision):
        from flows import tasks

        return tasks.prefetch_checkpoint.submit(request, revision)

    def outcome(self, future):
        return checkpoint_outcome(lambda: runners.checkpoint_result(future))

    def waiting(self, request):
        return runners.waiting(request)

    def as_completed(self, futures):
        from prefect.futures import as_completed

        return as_completed(futures)

    def round_size(self, request) -> int:
        return cluster.dask_workers(request) if self.window is None else self.window

    def progress(self, done: int, total: int) -> None:
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        if self._artifact is None:
            self._artifact = create_progress_artifact(
                100.0 * done / total, description=f"checkpoints of {self.request.model_id} analysed"
            )
        elif done == total or time.monotonic() - self._updated > PROGRESS_EVERY_S:
            update_progress_artifact(self._artifact, 100.0 * min(1.0, done / total))
        else:
            return  # (the clock runs from the last API call, so a steady stream of checkpoints still updates it)
        self._updated = time.monotonic()

    def reported(self, report) -> None:
        """The report's summary as Prefect artifacts (markdown, table, link)."""
        from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

        model_id = self.request.model_id
        key = "dormant-" + "".join(c if c.isalnum() else "-" for c in model_id.lower())
        create_markdown_artifact(report.markdown, key=key, description=f"dormant heads of {model_id}")
        create_table_artifact(
            report.summary_rows,
            key=f"{key}-table",
            description="per score function: first dormant checkpoint, final % dormant, transitions",
        )
        create_link_artifact(
            report.index_html.resolve().as_uri(), link_text=f"evolution report of {model_id}", key=f"{key}-report"
        )
