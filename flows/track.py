"""The track flow: checkpoints -> load -> score -> masks -> store -> transitions -> report.

Core functions: `dormant_tasks.tracker.plan_series`, `resolve_series_taus`, `analyze_checkpoint`,
`derive_series` (through the task wrappers of `dormant_tasks.tasks`). The flow takes the run's
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

from dormant_tasks import tasks
from dormant_tasks.requests import Runner, TrackRequest
from dormant_tasks.store import check_store, stored_checkpoint_keys
from dormant_tasks.tracker import CheckpointResult, is_stored, known_commit

PROGRESS_EVERY_S = 5.0


@flow(name="track", log_prints=True, validate_parameters=False)
def track(request: TrackRequest, progress: bool = False) -> dict:
    """Track dormant heads through a series of checkpoints; returns a summary dict.

    `request` is a `TrackRequest` (or its dict, as a deployment passes it). With the local runner one
    checkpoint is scored while the next one downloads (a disk that holds two checkpoints is enough); with
    the Dask runner every checkpoint is submitted at once.
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
        request.calibration.calibration_id,
        request.request_id,
    )
    series = tasks.series_taus(request, plan)
    log.info(
        "taus %s: %s",
        series.taus_id,
        ", ".join(f"{t.score_fn} {t.direction} {t.value:.4g}" for t in series.taus.values()),
    )
    for warning in series.warnings:
        log.info("%s", warning)
    results = _run_checkpoints(request, plan.selected, series, progress)
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
        "report": None,
    }
    if request.report:
        out["report"] = str(_report(request.store, request.model_id, request.reports_dir))
    return out


def _run_checkpoints(request: TrackRequest, selected, series, progress: bool) -> list[CheckpointResult]:
    """Analyse every selected checkpoint not yet stored; the reference one (if any) is already done."""
    done = [series.reference] if series.reference is not None else []
    stored = stored_checkpoint_keys(request.store, request.model_id)
    skipped = [
        CheckpointResult(r, known_commit(r) or "", True, {}, {})
        for r in selected
        if r not in [d.revision for d in done] and is_stored(request, r, series.taus_id, stored)
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
        with _resources(request.device):
            futures = [tasks.analyze_checkpoint.submit(request, r, series) for r in todo]
        for future in as_completed(futures):
            advance(future.result())
    else:
        for current, nxt in zip(todo, todo[1:] + [None]):
            if nxt is not None and nxt.path is None:
                tasks.prefetch_checkpoint.submit(request, nxt)  # the next download overlaps this scoring
            advance(tasks.analyze_checkpoint(request, current, series))
    bar.close()
    return results


def _resources(device: str):
    """On a Dask cluster, a CUDA task asks for one `GPU` resource (workers started with `--resources GPU=1`)."""
    if device != "cuda":
        return contextlib.nullcontext()
    import dask

    return dask.annotate(resources={"GPU": 1})


def _bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="checkpoints", unit="ckpt", disable=None if enabled else True)  # None: TTY only


def _report(store: str, model_id: str, out_dir: str | None) -> Path:
    """Render the evolution report and publish its summary as Prefect artifacts (markdown, table, link)."""
    from dormant_tasks.report import render_report

    result = render_report(store, model_id, out_dir)
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
