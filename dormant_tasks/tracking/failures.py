"""Checkpoints that cannot be downloaded, loaded or scored (docs/DATA_CONTRACT.md "failed_checkpoints"): caught
where a checkpoint's computing ends (`checkpoint_outcome`), recorded with their reason by the one writer
(`record_failure`, through `checkpoint_work.write_checkpoint`), cleared once a rerun stores them, listed by
`dormant status` and the report."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from dormant_tasks.checkpoints import Revision
from dormant_tasks.errors import CheckpointError, ScoringError
from dormant_tasks.store import Table, is_store, read_table, series_lock, write_request, write_table
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import CheckpointResult, common_columns, known_commit

# What makes one checkpoint fail, not the run: it cannot be downloaded or loaded (`CheckpointError`: a truncated
# file, a revision the Hub lost), or its inputs cannot be scored on it (`ScoringError`, which a model's own forward
# pass failing on it becomes: `checkpoint_work.unscorable`). A bad option, a store error or a full disk stops the
# run (exit 2); anything else is a bug and keeps its traceback.
CHECKPOINT_FAILURES = (CheckpointError, ScoringError)
CheckpointFailure = CheckpointError | ScoringError
FAILURES_KEY = "failed"  # file key of a series' one failed_checkpoints file

T = TypeVar("T")


def checkpoint_outcome(compute: Callable[[], T]) -> T | CheckpointFailure:
    """What `compute()` returns (a checkpoint's rows), or the error that makes this checkpoint fail, not the run
    (`CHECKPOINT_FAILURES`), as a value for the writer to record. The same for every runner: `compute` is a task
    called in the flow's thread (local runner) or a Dask future's `result`. Any other error propagates."""
    try:
        return compute()
    except CHECKPOINT_FAILURES as e:
        return e


def record_failure(request: TrackRequest, revision: Revision, reason: str) -> CheckpointResult:
    """Record that `revision` failed (one row per revision, the newest reason wins) and return it as a result."""
    row = {
        **common_columns(request.model_id, revision),
        "commit": known_commit(revision),
        "reason": reason,
        "failed_at": datetime.now(UTC),
        "request_id": request.request_id,
    }
    with series_lock(request.store, request.model_id):
        rows = [r for r in failed_checkpoints(request.store, request.model_id) if r["revision"] != revision.name]
        write_request(request.store, request.model_id, request)
        write_table(
            request.store, Table.failed_checkpoints, [*rows, row], file_key=FAILURES_KEY, model_id=request.model_id
        )
    return CheckpointResult(revision, row["commit"] or "", False, {}, {}, failed=reason)


def clear_failure(request: TrackRequest, revision: Revision) -> None:
    """A checkpoint stored now is no longer failed: its row goes (nothing is read or written when it has none)."""
    rows = failed_checkpoints(request.store, request.model_id)
    if not any(r["revision"] == revision.name for r in rows):
        return
    with series_lock(request.store, request.model_id):
        rows = [r for r in failed_checkpoints(request.store, request.model_id) if r["revision"] != revision.name]
        write_table(request.store, Table.failed_checkpoints, rows, file_key=FAILURES_KEY, model_id=request.model_id)


def failed_checkpoints(store, model_id: str) -> list[dict]:
    """The series' checkpoints that failed and were not stored since, in series order (none without a store)."""
    if not is_store(store):
        return []
    rows = read_table(store, Table.failed_checkpoints, model_id=model_id).to_pylist()  # no file: a glob, no read
    return sorted(rows, key=lambda r: (r["stage"], r["step"], r["revision"]))
