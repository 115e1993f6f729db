"""The track flow, the one orchestrator of a track run: state -> taus -> checkpoints -> transitions -> report.

Core functions: `dormant_tasks.tracking.series_state`, `resolve_series_taus`, `compute_checkpoint`,
`write_checkpoint`, `derive_series` (through the task wrappers of `flows.tasks`). The flow takes the run's
`TrackRequest` whole (and the `SeriesState` the CLI asked for already, so that a run asks it once), fans the
checkpoints out to its task runner, logs, and returns a `TrackResult`; the science is in the library.

One per-checkpoint path for every runner: a task computes a checkpoint's rows and returns them (it needs the
checkpoint and a cache, never the store); the flow alone writes them, through `_write_checkpoint`, which the taus'
step is handed for the checkpoint it scores. A checkpoint that fails is recorded by the same function and the run
goes on (`request.fail_fast`: it stops).
"""

from __future__ import annotations

import contextlib
import time
from functools import partial
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.futures import as_completed

from dormant_tasks import tracking
from dormant_tasks.atomic import sweep_dead_temps
from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.outputs import report_folder
from dormant_tasks.progress import progress_bar, waiting
from dormant_tasks.store import check_store, hold_series
from dormant_tasks.tracking import CheckpointResult, Runner, SeriesState, TrackRequest, TrackResult
from flows import tasks

PROGRESS_EVERY_S = 5.0


@flow(name="track", log_prints=True, validate_parameters=False)
def track(request: TrackRequest, progress: bool = False, state: SeriesState | None = None) -> TrackResult:
    """Track dormant heads through a series of checkpoints; returns the run's `TrackResult`.

    `request` is a `TrackRequest` (or its dict, as a deployment passes it); `state` the series' state when the
    caller asked for it already (the CLI does, to answer a finished rerun without Prefect). With the local
    runner one checkpoint is scored while the next one downloads (a disk that holds two checkpoints is
    enough); with the Dask runner every checkpoint is submitted at once. On both, the task returns the rows and
    the flow writes them.
    """
    request = state.request if isinstance(state, SeriesState) else TrackRequest.coerce(request)
    with hold_series(request.store, request.model_id):  # one writer per series (the CLI holds it already)
        return _track(request, progress, state)


def _track(request: TrackRequest, progress: bool, state: SeriesState | None) -> TrackResult:
    log = get_run_logger()
    if request.report:  # report staging folders that a killed run left (the store's went as it took the series)
        sweep_dead_temps(report_folder(request.model_id, request.reports_dir).resolve().parent)
    if not isinstance(state, SeriesState):  # a deployment's run, or a test's: nobody asked yet
        check_store(request.store)
        state = tasks.series_state(request)
    request, plan = state.request, state.plan  # naming no calibration set: the stored series' own sets
    refused = tracking.record_audit(request, plan)  # before any download: what the audit set aside, and why
    for name, flag in ({} if request.keep_duplicates else plan.set_aside).items():
        log.info("%s: set aside, not a point of training: %s", name, flag.text)
    log.info(
        "%s: %d of %d checkpoints selected (%s), calibration %s, request %s",
        request.model_id,
        len(plan.selected),
        len(plan.listed),
        request.selection.describe(),
        ", ".join(c.calibration_id for c in request.calibration_sets),
        request.request_id,
    )
    ahead = _prefetch_past_reference(request, state)
    with _fixing_taus(request, state, progress):
        series = tasks.series_taus(request, state, _score_on_runner(request), _write_checkpoint)
    # the listing, once the series holds its taus (a run refused before then leaves nothing): what lies between pairs
    tracking.record_listing(request.store, request.model_id, plan, request.request_id)
    log.info(
        "taus %s: %s",
        series.taus_id,
        ", ".join(f"{t.score_fn} {t.direction} {t.value:.4g}" for t in series.taus.values()),
    )
    for warning in series.warnings:
        log.info("%s", warning)
    results = refused + _run_checkpoints(request, state, series, progress, ahead)
    summary = tasks.derive_transitions(request)
    result = TrackResult.of(
        request,
        results,
        n_checkpoints=summary.n_checkpoints,
        n_transitions=summary.n_transitions,
        n_stale=summary.n_stale,
        taus_id=series.taus_id,
        warnings=tuple(series.warnings),
        input_scores=request.input_scores.value,
    )
    log.info(
        "%s: %d checkpoints analysed now, %d already stored, %d failed; series holds %d checkpoints, %d transitions",
        request.model_id,
        result.analysed,
        result.skipped,
        len(result.failed),
        summary.n_checkpoints,
        summary.n_transitions,
    )
    if request.report:
        result = _with_report(
            result, _report(request.store, request.model_id, request.reports_dir, request.fdr, request.fdr_method)
        )
    return result


def _fixing_taus(request: TrackRequest, state: SeriesState, progress: bool):
    """While a series' taus are fixed by scoring one checkpoint (a new series, a --retau): a progress line every
    20 s on a pipe (`progress.waiting`), so that the run is not silent while it downloads, loads and scores it."""
    if not progress or state.taus is not None:
        return contextlib.nullcontext()
    checkpoint = tracking.taus_checkpoint(request, state.plan).name
    return waiting(f"taus of {request.model_id}: scoring {checkpoint}")


def _with_report(result: TrackResult, path: Path) -> TrackResult:
    from dataclasses import replace

    return replace(result, report=str(path))


def _prefetch_past_reference(request: TrackRequest, state: SeriesState) -> dict:
    """Local runner, new series: `series_taus` scores one checkpoint before any other (the reference of
    quantile taus, or the first selected one). Download it first (alone), then start the download of the first
    checkpoint the loop analyses, so that one overlaps that scoring too. Returns {revision: prefetch future}
    for `_run_checkpoints`. Only for a new series: there every selected checkpoint will be analysed, so no
    prefetch is wasted."""
    plan = state.plan
    if request.runner is not Runner.LOCAL or not state.is_new or request.budget is not None:
        return {}  # (a budgeted run chooses its checkpoints as it goes)
    reference = tracking.taus_checkpoint(request, plan)
    first = next((r for r in plan.selected if r != reference), None)
    if reference.path is not None or first is None or first.path is not None:
        return {}
    tasks.prefetch_checkpoint.submit(request, reference).wait()  # a failure is series_taus's to report, as before
    return {first: tasks.prefetch_checkpoint.submit(request, first)}


def _run_checkpoints(
    request: TrackRequest, state: SeriesState, series, progress: bool, ahead: dict | None = None
) -> list[CheckpointResult]:
    """Compute and write every selected checkpoint not yet stored; the reference one (if any) is already done.
    `ahead`: prefetches already started ({revision: future}, local runner)."""
    selected = state.plan.selected
    todo = tracking.pending_revisions(request, state, series)
    done = [series.reference] if series.reference is not None else []
    skipped = [
        CheckpointResult(r, tracking.known_commit(r) or "", True, {}, {})
        for r in selected
        if r not in todo and r not in [d.revision for d in done]
    ]
    results = done + skipped
    total = len(selected) if request.budget is None else max(len(results), min(len(selected), request.budget))
    artifact = create_progress_artifact(
        100.0 * len(results) / total, description=f"checkpoints of {request.model_id} analysed"
    )
    # A bar on a terminal; on a pipe or file a plain line at least every 20 s, even while one checkpoint downloads.
    bar = progress_bar(
        total=total, initial=len(results), desc="checkpoints", unit="ckpt", enabled=progress and bool(todo)
    )

    last_update = [time.monotonic()]

    def advance(result):
        results.append(result)
        bar.update(1)
        # An artifact update is an API round trip: at most one every few seconds, and the final one.
        if len(results) == total or time.monotonic() - last_update[0] > PROGRESS_EVERY_S:
            update_progress_artifact(artifact, 100.0 * min(1.0, len(results) / total))
            last_update[0] = time.monotonic()

    try:
        if request.retau:  # checkpoints with kept per-input scores are re-aggregated here, without a model
            todo = [r for r in todo if not _reaggregated(request, r, series, advance)]
        if request.budget is not None:
            _run_budgeted(request, state, todo, series, advance)
        elif request.runner is Runner.DASK:
            _run_on_dask(request, todo, series, advance)
        else:
            _run_locally(request, todo, series, advance, dict(ahead or {}))
    finally:
        bar.close()
    return results


def _run_budgeted(request: TrackRequest, state: SeriesState, todo: list, series, advance) -> None:
    """`--budget`: the budgeted search over the selection (`tracking.run_budgeted`), the checkpoints stored
    already counted: its coarse pass, then rounds of refinement, one checkpoint a round locally, as many as the
    Dask cluster has workers on Dask; each round computed and written as any run's checkpoints are."""
    from flows.runners import dask_workers

    log = get_run_logger()

    def run(revisions: list) -> list[CheckpointResult]:
        log.info("budget: scoring %s", ", ".join(r.name for r in revisions))
        outcomes: list[CheckpointResult] = []

        def keep(result: CheckpointResult) -> None:
            outcomes.append(result)
            advance(result)

        if request.runner is Runner.DASK:
            _run_on_dask(request, revisions, series, keep)
        else:
            _run_locally(request, revisions, series, keep, {})
        return outcomes

    at_once = dask_workers(request) if request.runner is Runner.DASK else 1
    scored = tracking.run_budgeted(request, state.plan.selected, todo, run, at_once)
    log.info(
        "budget: %d of %d selected checkpoints scored (budget %d)",
        len(scored),
        len(state.plan.selected),
        request.budget,
    )


def _write_checkpoint(request: TrackRequest, revision, outcome) -> CheckpointResult:
    """The flow's one write of a checkpoint, for every runner: `outcome` is the rows a task computed (or
    `--retau` re-aggregated), or the failure that stopped its task (`tracking.checkpoint_outcome`); the rows
    are committed, the failure recorded (`request.fail_fast`: raised), by `tracking.write_checkpoint`."""
    result = tracking.write_checkpoint(request, revision, outcome)
    log = get_run_logger()
    if result.failed is not None:
        log.warning("%s: failed, recorded; the run goes on (a rerun retries it): %s", revision.name, result.failed)
    else:
        log.info(
            "%s: stored (write %.1fs); %s dormant %s",
            revision.name,
            result.seconds.get("write", 0),
            DEFAULT_FN,
            f"{result.pct_dormant[DEFAULT_FN]:.1f}%" if DEFAULT_FN in result.pct_dormant else "n/a",
        )
    return result


def _reaggregated(request: TrackRequest, revision, series, advance) -> bool:
    """--retau: re-aggregate a checkpoint whose per-input scores were kept, and write it; False when they were
    not (the checkpoint is scored again)."""
    rows = tracking.reaggregate_from_input_scores(request, revision, series)
    if rows is not None:
        advance(_write_checkpoint(request, revision, rows))
    return rows is not None


def _run_locally(request: TrackRequest, todo: list, series, advance, ahead: dict) -> None:
    """One checkpoint computed in this process while the next one downloads (`ahead`: {revision: prefetch}),
    then written."""
    for current, nxt in zip(todo, todo[1:] + [None]):
        if current in ahead:  # one download at a time: the next starts once this one is on disk (or failed, and
            ahead.pop(current).wait()  # the computing below retries it), else they share the bandwidth
        if nxt is not None and nxt.path is None:
            ahead[nxt] = tasks.prefetch_checkpoint.submit(request, nxt)  # overlaps this scoring
        outcome = tracking.checkpoint_outcome(partial(tasks.compute_checkpoint, request, current, series))
        advance(_write_checkpoint(request, current, outcome))


def _run_on_dask(request: TrackRequest, todo: list, series, advance) -> None:
    """Every checkpoint submitted at once; workers only compute (they need no store, nor a disk shared with it)
    and each is written here as it comes back. One whose workers died (`runners.checkpoint_result`) is recorded
    as failed, as one they could not load."""
    from flows.runners import checkpoint_result, dask_lines_off, gpu_resources, reporting_to_flow_api

    with gpu_resources(request.device), reporting_to_flow_api():
        futures = {tasks.compute_checkpoint.submit(request, r, series): r for r in todo}
    with dask_lines_off():
        for future in as_completed(list(futures)):
            outcome = tracking.checkpoint_outcome(partial(checkpoint_result, future))
            advance(_write_checkpoint(request, futures[future], outcome))


def _score_on_runner(request: TrackRequest):
    """Dask: the checkpoint that fixes a new series' taus is scored on a worker (its scores come back to the
    flow, which writes them), so no model is loaded where the flow runs. Local runner: None (in process)."""
    if request.runner is not Runner.DASK:
        return None
    from flows.runners import checkpoint_result, dask_lines_off, gpu_resources, reporting_to_flow_api

    def score(request: TrackRequest, revision):
        with gpu_resources(request.device), reporting_to_flow_api():
            future = tasks.score_checkpoint.submit(request, revision)
        with dask_lines_off():
            return checkpoint_result(future)

    return score


def _report(store: str, model_id: str, out_dir: str | None, fdr: float, fdr_method: str | None) -> Path:
    """Render the evolution report and publish its summary as Prefect artifacts (markdown, table, link)."""
    from dormant_tasks.reporting import ReportSettings, render_report
    from dormant_tasks.statistics import FDR_METHOD

    settings = ReportSettings(fdr=fdr, fdr_method=fdr_method or FDR_METHOD)
    result = render_report(store, model_id, out_dir, settings, reuse=True)  # unchanged inputs: the report as it is
    key = "dormant-" + "".join(c if c.isalnum() else "-" for c in model_id.lower())
    create_markdown_artifact(result.markdown, key=key, description=f"dormant heads of {model_id}")
    create_table_artifact(
        result.summary_rows,
        key=f"{key}-table",
        description="per score function: first dormant checkpoint, final % dormant, transitions",
    )
    create_link_artifact(
        result.index_html.resolve().as_uri(), link_text=f"evolution report of {model_id}", key=f"{key}-report"
    )
    return result.index_html
