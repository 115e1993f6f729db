"""The track flow: checkpoints -> load -> score -> masks -> store -> transitions -> report.

Core functions: `dormant_tasks.tracking.tracker.plan_series`, `resolve_series_taus`, `analyze_checkpoint`,
`derive_series` (through the task wrappers of `flows.tasks`). The flow takes the run's
`TrackRequest` whole, fans the checkpoints out to its task runner, and logs; the science is in the library.
"""

from __future__ import annotations

import contextlib
import time
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

from dormant_tasks.requests import Runner, TrackRequest
from dormant_tasks.store.io import check_store, stored_checkpoint_keys
from dormant_tasks.tracking import tracker
from dormant_tasks.tracking.series import SeriesView
from dormant_tasks.tracking.tracker import CheckpointResult, is_stored, known_commit
from flows import tasks

PROGRESS_EVERY_S = 5.0


@flow(name="track", log_prints=True, validate_parameters=False)
def track(request: TrackRequest, progress: bool = False) -> dict:
    """Track dormant heads through a series of checkpoints; returns a summary dict.

    `request` is a `TrackRequest` (or its dict, as a deployment passes it). With the local runner one
    checkpoint is scored while the next one downloads (a disk that holds two checkpoints is enough); with
    the Dask runner every checkpoint is submitted at once, workers return its rows and the flow writes them.
    """
    request = TrackRequest.coerce(request)
    log = get_run_logger()
    check_store(request.store)
    plan = tasks.plan_series(request)
    log.info(
        "%s: %d of %d checkpoints selected (%s), calibration %s, request %s",
        request.model_id,
        len(plan.selected),
        len(plan.listed),
        request.selection.describe(),
        ", ".join(c.calibration_id for c in request.calibration_sets),
        request.request_id,
    )
    ahead = _prefetch_past_reference(request, plan)
    series = tasks.series_taus(request, plan, _score_on_runner(request))
    log.info(
        "taus %s: %s",
        series.taus_id,
        ", ".join(f"{t.score_fn} {t.direction} {t.value:.4g}" for t in series.taus.values()),
    )
    for warning in series.warnings:
        log.info("%s", warning)
    results = _run_checkpoints(request, plan.selected, series, progress, ahead)
    done = [r for r in results if not r.skipped]
    summary = tasks.derive_transitions(request)
    log.info(
        "%s: %d checkpoints analysed now, %d already stored; series holds %d checkpoints, %d transitions",
        request.model_id,
        len(done),
        len(results) - len(done),
        summary.n_checkpoints,
        summary.n_transitions,
    )
    out = {
        "model_id": request.model_id,
        "store": request.store,
        "analysed": len(done),
        "skipped": len(results) - len(done),
        "n_checkpoints": summary.n_checkpoints,
        "n_transitions": summary.n_transitions,
        "n_stale": summary.n_stale,
        "taus_id": series.taus_id,
        "request_id": request.request_id,
        "warnings": list(series.warnings),
        "n_truncated": max((r.n_truncated for r in results), default=0),
        "input_scores": request.input_scores.value,
        "report": None,
    }
    if request.report:
        out["report"] = str(_report(request.store, request.model_id, request.reports_dir))
    return out


def _prefetch_past_reference(request: TrackRequest, plan) -> dict:
    """Local runner, new series: `series_taus` scores one checkpoint before any other (the reference of
    quantile taus, or the first selected one). Download it first (alone), then start the download of the first
    checkpoint the loop analyses, so that one overlaps that scoring too. Returns {revision: prefetch future}
    for `_run_checkpoints`. Only for a new series: there every selected checkpoint will be analysed, so no
    prefetch is wasted."""
    if request.runner is not Runner.LOCAL or SeriesView.exists(request.store, request.model_id):
        return {}
    reference = tracker.taus_checkpoint(request, plan)
    first = next((r for r in plan.selected if r != reference), None)
    if reference.path is not None or first is None or first.path is not None:
        return {}
    tasks.prefetch_checkpoint.submit(request, reference).wait()  # a failure is series_taus's to report, as before
    return {first: tasks.prefetch_checkpoint.submit(request, first)}


def _run_checkpoints(
    request: TrackRequest, selected, series, progress: bool, ahead: dict | None = None
) -> list[CheckpointResult]:
    """Analyse every selected checkpoint not yet stored; the reference one (if any) is already done.
    `ahead`: prefetches already started ({revision: future}, local runner)."""
    done = [series.reference] if series.reference is not None else []
    stored = stored_checkpoint_keys(request.store, request.model_id)
    skipped = [
        CheckpointResult(r, known_commit(r) or "", True, {}, {})
        for r in selected
        if r not in [d.revision for d in done] and is_stored(request, r, series, stored)
    ]
    todo = [r for r in selected if r not in [d.revision for d in done + skipped]]
    results = done + skipped
    artifact = create_progress_artifact(
        100.0 * len(results) / len(selected), description=f"checkpoints of {request.model_id} analysed"
    )
    bar = _bar(len(selected), progress)
    bar.update(len(results))

    last_update = [time.monotonic()]

    def advance(result):
        results.append(result)
        bar.update(1)
        # An artifact update is an API round trip: at most one every few seconds, and the final one.
        if len(results) == len(selected) or time.monotonic() - last_update[0] > PROGRESS_EVERY_S:
            update_progress_artifact(artifact, 100.0 * len(results) / len(selected))
            last_update[0] = time.monotonic()

    if request.runner is Runner.DASK:
        # Workers only compute (they need no store, nor a disk shared with it); this flow is the one writer.
        if request.retau:  # checkpoints with kept per-input scores are re-aggregated here, without a model
            redone = [tracker.reaggregate_from_input_scores(request, r, series) for r in todo]
            for result in filter(None, redone):
                advance(result)
            todo = [r for r, result in zip(todo, redone) if result is None]
        with _resources(request.device):
            futures = [tasks.compute_checkpoint.submit(request, r, series) for r in todo]
        for future in as_completed(futures):
            advance(tracker.write_rows(request, future.result()))
    else:
        ahead = dict(ahead or {})
        for current, nxt in zip(todo, todo[1:] + [None]):
            if current in ahead:  # one download at a time: the next starts once this one is on disk (or failed,
                ahead.pop(current).wait()  # and the analysis below retries it), else they would share the bandwidth
            if nxt is not None and nxt.path is None:
                ahead[nxt] = tasks.prefetch_checkpoint.submit(request, nxt)  # the next download overlaps this scoring
            advance(tasks.analyze_checkpoint(request, current, series))
    bar.close()
    return results


def _score_on_runner(request: TrackRequest):
    """Dask: the checkpoint that fixes a new series' taus is scored on a worker (its scores come back to the
    flow, which writes them), so no model is loaded where the flow runs. Local runner: None (in process)."""
    if request.runner is not Runner.DASK:
        return None

    def score(request: TrackRequest, revision):
        with _resources(request.device):
            future = tasks.score_checkpoint.submit(request, revision)
        return future.result()

    return score


def _resources(device: str):
    """On a Dask cluster, a CUDA task asks for one `GPU` resource (workers started with `--resources GPU=1`)."""
    from flows.runners import uses_gpu

    if not uses_gpu(device):  # cuda, cuda:N, or auto on a machine with a GPU
        return contextlib.nullcontext()
    import dask

    return dask.annotate(resources={"GPU": 1})


def _bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="checkpoints", unit="ckpt", disable=None if enabled else True)  # None: TTY only


def _report(store: str, model_id: str, out_dir: str | None) -> Path:
    """Render the evolution report and publish its summary as Prefect artifacts (markdown, table, link)."""
    from dormant_tasks.reporting.report import render_report

    result = render_report(store, model_id, out_dir, reuse=True)  # unchanged inputs: the report as it is
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
