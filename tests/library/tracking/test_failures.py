"""A checkpoint that cannot be loaded is recorded as failed and the run goes on (the tracker's steps, no Prefect):
a real series of four random tiny checkpoints, one of them truncated on disk, into a real store."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from dormant_tasks import tracking as tracker
from dormant_tasks.errors import CheckpointError
from dormant_tasks.reporting.report import render_report
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking import checkpoint_work
from dormant_tasks.tracking.request import TrackRequest
from tests.builders.series import save_random_series
from tests.builders.track import track_steps as run_steps

NAMES = ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "stage1-step25-tokens51K", "stage1-step40-tokens82K"]
BAD = NAMES[2]


def _truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 3)


def _checksum(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "_locks" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def _stored(store) -> list[str]:
    return sorted(set(read_table(store, "checkpoints").column("revision").to_pylist()))


def test_one_truncated_checkpoint_of_four_is_recorded_the_others_stored_and_a_rerun_stores_it(
    tmp_path, tiny_tokenizer, monkeypatch
):
    series = save_random_series(tmp_path / "random-olmo2", tiny_tokenizer, NAMES)
    _truncate(series / BAD / "model.safetensors")
    store = tmp_path / "store"
    request = TrackRequest(source=str(series), store=str(store), limit=4, score_fns=("ahon_ln", "awft"), report=False)

    result = run_steps(request)
    assert (result.analysed, result.skipped, result.n_checkpoints) == (3, 0, 3)
    assert [name for name, _ in result.failed] == [BAD]
    reason = result.failed[0][1]
    assert "the file is cut short" in reason and BAD in reason and "--model" not in reason
    assert _stored(store) == sorted(set(NAMES) - {BAD})
    rows = tracker.failed_checkpoints(store, request.model_id)
    assert [(r["revision"], r["reason"], r["request_id"]) for r in rows] == [(BAD, reason, request.request_id)]
    report = render_report(store, request.model_id, tmp_path / "reports", reuse=True)
    assert f"1 checkpoint failed, not stored (a rerun of `dormant track` retries):\n\n- {BAD}: " in report.markdown
    assert BAD in report.index_html.read_text(encoding="utf-8")

    # the failed checkpoint is what a rerun has left to do; its computing fails as a value (the writer's to
    # record), and with --fail-fast the writer raises it and writes nothing
    state = tracker.series_state(request)
    assert [r.name for r in state.pending] == [BAD]
    before = _checksum(store)
    outcome = tracker.checkpoint_outcome(partial(tracker.compute_checkpoint, request, state.pending[0], state.taus))
    assert isinstance(outcome, CheckpointError) and _checksum(store) == before
    with pytest.raises(CheckpointError, match="the file is cut short"):
        tracker.write_checkpoint(replace(request, fail_fast=True), state.pending[0], outcome)
    assert _checksum(store) == before

    # fixed on disk: the rerun loads that one checkpoint only, stores it, and its failure is gone
    (series / BAD / "model.safetensors").unlink()
    save_random_series(series, tiny_tokenizer, [BAD], first_seed=2)  # its own weights again, not step 0's
    loads = []
    real = checkpoint_work.lazy_load_checkpoint

    def counting(source, revision, *a, **k):
        loads.append(revision.name)
        return real(source, revision, *a, **k)

    monkeypatch.setattr(checkpoint_work, "lazy_load_checkpoint", counting)
    again = run_steps(request)
    assert loads == [BAD]
    assert (again.analysed, again.failed, again.n_checkpoints) == (1, (), 4)
    assert _stored(store) == sorted(NAMES)
    assert tracker.failed_checkpoints(store, request.model_id) == []
    assert tracker.series_state(request).done
    report = render_report(store, request.model_id, tmp_path / "reports", reuse=True)  # its inputs changed
    assert "failed" not in report.markdown and "4 checkpoints from" in report.markdown


def test_a_failure_recorded_twice_keeps_one_row_with_the_newest_reason(tmp_path, tiny_tokenizer):
    series = save_random_series(tmp_path / "random-olmo2", tiny_tokenizer, NAMES[:2])
    request = TrackRequest(source=str(series), store=str(tmp_path / "store"), limit=4, report=False)
    revision = tracker.plan_series(request).selected[1]
    first = tracker.record_failure(request, revision, "first reason")
    assert first.failed == "first reason" and not first.skipped
    tracker.record_failure(request, revision, "second reason")
    rows = tracker.failed_checkpoints(request.store, request.model_id)
    assert [(r["revision"], r["reason"]) for r in rows] == [(revision.name, "second reason")]
    assert tracker.failed_checkpoints(tmp_path / "no-store", request.model_id) == []


def _with_config(folder: Path, **changes) -> None:
    import json

    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _vocab_of(folder: Path, tokenizer, vocab_size: int) -> None:
    """`folder`'s checkpoint made again with a vocabulary smaller than its tokenizer's (weights and config agree,
    so it loads): the embedding lookup of the tokenizer's higher ids fails inside the forward pass."""
    import shutil

    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config

    shutil.rmtree(folder)
    config = tiny_config(tokenizer, n_layers=2, n_heads=4, hidden_size=64)
    config.vocab_size = vocab_size
    config.pad_token_id = config.bos_token_id = config.eos_token_id = 0
    torch.manual_seed(7)
    Olmo2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


@pytest.mark.parametrize(
    ("damage", "cause"),
    [
        (lambda folder, tok: _with_config(folder, num_hidden_layers=0), "num_hidden_layers 0"),
        (lambda folder, tok: _vocab_of(folder, tok, 16), "IndexError"),
    ],
    ids=["no-layers", "forward-fails"],
)
def test_a_checkpoint_the_engine_cannot_score_for_any_reason_is_recorded_and_the_run_goes_on(
    tmp_path, tiny_tokenizer, damage, cause
):
    """Issue 62 item 1: a config of 0 layers (torch.stack of no layers raised RuntimeError through the task engine,
    retried, then the run died) and a forward pass that fails inside the model (not one of ours) are one line each,
    recorded as failed; the other checkpoints are stored and a rerun answers the same, still without a traceback."""
    series = save_random_series(tmp_path / "random-olmo2", tiny_tokenizer, NAMES)
    damage(series / BAD, tiny_tokenizer)
    store = tmp_path / "store"
    request = TrackRequest(source=str(series), store=str(store), limit=4, score_fns=("ahon_ln", "awft"), report=False)

    result = run_steps(request)
    assert [name for name, _ in result.failed] == [BAD]
    reason = result.failed[0][1]
    assert cause in reason and BAD in reason and "\n" not in reason and "Traceback" not in reason
    assert _stored(store) == sorted(set(NAMES) - {BAD})
    again = run_steps(request)
    assert [(name, why) for name, why in again.failed] == [(BAD, reason)]
    assert [r["reason"] for r in tracker.failed_checkpoints(store, request.model_id)] == [reason]
