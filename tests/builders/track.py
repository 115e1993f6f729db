"""A track run without Prefect, and what a test reads back of its store: rows, manifests."""

from __future__ import annotations

from pathlib import Path


def track_steps(request):
    """The track flow's steps, called as the flow calls them (one state, the taus, each pending checkpoint computed,
    then written: `store_checkpoint`), without Prefect: a real series tracked into a real store by the library."""
    from dormant_tasks import tracking as tracker
    from dormant_tasks.tracking.tracker import TrackResult

    state = tracker.series_state(request)
    refused = tracker.record_audit(state.request, state.plan)  # what the integrity audit set aside, before any work
    series = tracker.resolve_series_taus(request, state)
    tracker.record_listing(request.store, state.request.model_id, state.plan, state.request.request_id)
    results = refused + ([series.reference] if series.reference is not None else [])
    pending = tracker.pending_revisions(request, state, series)
    if request.budget is None:
        results += [store_checkpoint(request, r, series) for r in pending]
    else:  # the budgeted search, as the flow's local runner runs it: one checkpoint a round after the coarse pass
        results += budget_results(request, state, series, pending)
    summary = tracker.derive_series(request)
    return TrackResult.of(request, results, n_checkpoints=summary.n_checkpoints)


def budget_results(request, state, series, pending, run_one=None) -> list:
    """`--budget`: the checkpoints `tracking.run_budgeted` chooses, each stored by `run_one` (default:
    `store_checkpoint`); their results."""
    from dormant_tasks import tracking as tracker

    results: list = []
    one = run_one or (lambda r: store_checkpoint(request, r, series))

    def run(revisions):
        done = [one(r) for r in revisions]
        results.extend(done)
        return done

    tracker.run_budgeted(request, state.plan.selected, pending, run)
    return results


def store_checkpoint(request, revision, series):
    """One checkpoint as the track flow handles it on every runner: its rows computed (or the failure that stopped
    that), then written by the one writer."""
    from functools import partial

    from dormant_tasks import tracking as tracker

    outcome = tracker.checkpoint_outcome(partial(tracker.compute_checkpoint, request, revision, series))
    return tracker.write_checkpoint(request, revision, outcome)


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
