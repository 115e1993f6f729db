"""Prefect @task wrappers around the library: thin, no science here. Flows in `flows/` submit these: a track run's
checkpoint work (`flows.track.PrefectTasks`), an evaluation's targets.

Retries are for transient failures only (network, a worker lost): a `DormantError` is the user's to fix
and is never retried. No Prefect caching (`cache_policy=NONE`): the store is the cache, and hashing the
inputs of every task run (config, calibration texts) costs time for nothing.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from dormant_tasks import tracking
from dormant_tasks.checkpoints import Revision, fetch_revision
from dormant_tasks.errors import DormantError
from dormant_tasks.evaluation import EvalRequest
from dormant_tasks.tracking import TrackRequest


def _transient(task, task_run, state) -> bool:
    """retry_condition_fn: retry anything but a DormantError (bad input does not get better by retrying)."""
    try:
        state.result()
    except DormantError:
        return False
    except Exception:
        return True
    return False


def _checkpoint_task(name: str, task_run_name: str):
    """A checkpoint's load/score task: retried twice (a lost worker, a flaky download), never for bad input."""
    return task(
        name=name,
        task_run_name=task_run_name,
        retries=2,
        retry_delay_seconds=[10, 60],
        retry_condition_fn=_transient,
        cache_policy=NONE,
    )


@_checkpoint_task("score-checkpoint", "score-{revision.name}")
def score_checkpoint(request: TrackRequest, revision: Revision) -> tuple[tracking.ScoredCheckpoint, ...]:
    """Load and score one checkpoint (every set), touching no store: on a Dask cluster the checkpoint a new
    series' taus come from is scored on a worker too, so the flow's host needs neither the model nor a GPU."""
    return tracking.score_checkpoint(request, revision)


@task(
    name="prefetch-checkpoint",
    task_run_name="prefetch-{revision.name}",
    retries=3,
    retry_delay_seconds=[10, 60, 300],
    retry_condition_fn=_transient,
    cache_policy=NONE,
)
def prefetch_checkpoint(request: TrackRequest, revision: Revision) -> str:
    """Download a Hub revision ahead of its scoring (a local checkpoint is used in place)."""
    return str(fetch_revision(request.source, revision, request.cache_dir))


@_checkpoint_task("compute-checkpoint", "compute-{revision.name}")
def compute_checkpoint(
    request: TrackRequest, revision: Revision, series: tracking.SeriesTaus
) -> tuple[tracking.CheckpointRows, ...]:
    """Score one checkpoint (every calibration set) and return its rows, touching no store: the one checkpoint
    task of every runner (a thread beside the flow, a Dask worker on another host); the flow writes the rows.
    A checkpoint that cannot be downloaded, loaded or scored raises (a `DormantError`: not retried)."""
    rows = tracking.compute_checkpoint(request, revision, series)
    s = rows[0].seconds
    get_run_logger().info(
        "%s: download %.1fs, load %.1fs, score %.1fs (rows go back to the flow, which writes them)",
        revision.name,
        s.get("download", 0),
        s.get("load", 0),
        s.get("score", 0),
    )
    return rows


@task(
    name="evaluate-checkpoint",
    task_run_name="evaluate-{target.revision.name}",
    retries=1,
    retry_delay_seconds=[30],
    retry_condition_fn=_transient,
    cache_policy=NONE,
)
def evaluate_checkpoint(request: EvalRequest, target) -> list[dict]:
    from dormant_tasks.evaluation import evaluate_target, format_leaderboard

    rows = evaluate_target(request, target, log=get_run_logger())
    get_run_logger().info("\n%s", format_leaderboard(target, rows))
    return rows
