"""Builders the tests of several folders share (imported as `builders`: tests/ is on sys.path through its
conftest). Kept out of conftest.py: tests/integration has a conftest of its own, so `from builders import`
would find whichever conftest was imported first."""

from __future__ import annotations

from pathlib import Path

from dormant_tasks.tiny import tiny_config


def save_random_series(folder, tokenizer, names, n_layers=2, n_heads=4, hidden_size=64):
    """Random-init tiny OLMo-2 checkpoints (one seed each) saved as a local series under OLMo-2 branch names."""
    import torch
    from transformers import Olmo2ForCausalLM

    for seed, name in enumerate(names):
        torch.manual_seed(seed)
        model = Olmo2ForCausalLM(tiny_config(tokenizer, n_layers=n_layers, n_heads=n_heads, hidden_size=hidden_size))
        model.save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
    return folder


def save_model_series(folder, tokenizer, names, build):
    """A local series of random-init checkpoints of any family: `build()` makes one model, after a seed per name."""
    import torch

    for seed, name in enumerate(names):
        torch.manual_seed(seed)
        build().save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
    return folder


def track_steps(request):
    """The track flow's steps, called as the flow calls them (one state, the taus, each pending checkpoint computed,
    then written: `store_checkpoint`), without Prefect: a real series tracked into a real store by the library."""
    from dormant_tasks import tracking as tracker
    from dormant_tasks.tracking.tracker import TrackResult

    state = tracker.series_state(request)
    series = tracker.resolve_series_taus(request, state)
    results = [series.reference] if series.reference is not None else []
    results += [store_checkpoint(request, r, series) for r in tracker.pending_revisions(request, state, series)]
    summary = tracker.derive_series(request)
    return TrackResult.of(request, results, n_checkpoints=summary.n_checkpoints)


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


def is_progress(line: str) -> bool:
    """A plain progress line (`dormant_tasks.progress`, on stderr when it is no terminal): a bar's
    "checkpoints: 1/4 ckpt, 3s elapsed (started)" or a waiting step's "taus of S: scoring R: 1m20s elapsed"."""
    import re

    return re.fullmatch(r".+: (\d+(/\d+)? \w+, )?(\d+h)?(\d+m)?\d+s elapsed.*", line) is not None
