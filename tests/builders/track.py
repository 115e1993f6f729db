"""A track run in this process, and what a test reads back of its store: rows, manifests."""

from __future__ import annotations

from pathlib import Path


def track_steps(request, executor=None):
    """A track run in this process, as a notebook's call runs it (`dormant_tasks.run.run_track`, no Prefect), with
    no report (the report's tests render theirs): a real series tracked into a real store by the library."""
    import dataclasses

    from dormant_tasks.run import Executor, run_track

    return run_track(dataclasses.replace(request, report=False), executor or Executor())


def stored_checkpoints(store) -> int:
    """Rows of the store's manifests, read as a watcher of a running `dormant track` may: each manifest is
    replaced whole (by rename) and exists, empty, before a series' first result, so count rows, not files."""
    import pyarrow.parquet as pq

    folder = Path(store) / "checkpoints"
    return sum(pq.read_metadata(p).num_rows for p in folder.rglob("*.parquet")) if folder.exists() else 0


# Columns that differ between two runs of the same request: when and by which request they ran (and so the bytes
# of the files whose checksums the manifest keeps).
RUN_COLUMNS = frozenset(
    {
        "analyzed_at",
        "seconds",
        "request_id",
        "head_scores_sha256",
        "head_scores_bytes",
        "input_scores_sha256",
        "input_scores_bytes",
    }
)
TRACK_TABLES = ("checkpoints", "head_scores", "input_scores", "taus", "transitions", "head_histories")


def store_rows(store) -> dict[str, list[str]]:
    """Every row of a track run's tables, in a canonical order, `RUN_COLUMNS` aside: equal for two stores that
    hold the same results."""
    from dormant_tasks.store.io import read_table

    out = {}
    for table in TRACK_TABLES:
        t = read_table(store, table)
        out[table] = sorted(repr(r) for r in t.select([c for c in t.column_names if c not in RUN_COLUMNS]).to_pylist())
    return out
