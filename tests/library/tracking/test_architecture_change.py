"""A series whose architecture changes mid-way (the tracker's steps, no Prefect): the changed checkpoint is
recorded as failed in one line naming both shapes and the fix, never stored, and findings, report and repair keep
working on what is stored. A store that an older version let take the changed checkpoint (made here by writing
its rows past the check, as that version did) is read without it: the view sets it aside and says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dormant_tasks import tracking as tracker
from dormant_tasks.findings import series_findings
from dormant_tasks.reporting.report import render_report
from dormant_tasks.store import repair_store
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking import SeriesView
from dormant_tasks.tracking.request import TrackRequest
from tests.builders.series import save_random_series
from tests.builders.track import track_steps

pytestmark = [pytest.mark.slow]  # two tiny series tracked twice each: ~25 s a test

NAMES = ["stage1-step0-tokens0K", "stage1-step10-tokens20K"]
WIDER = "stage1-step25-tokens51K"  # 8 heads of width 16 where the series has 4


def _series_with_a_wider_checkpoint(tmp_path: Path, tokenizer) -> tuple[Path, Path]:
    series = save_random_series(tmp_path / "random-olmo2", tokenizer, NAMES)
    other = save_random_series(tmp_path / "wider", tokenizer, [WIDER], n_heads=8, hidden_size=128)
    return series, other / WIDER


def _request(series: Path, store: Path, **kw) -> TrackRequest:
    return TrackRequest(source=str(series), store=str(store), score_fns=("ahon_ln", "awft"), report=False, **kw)


def test_a_checkpoint_of_another_architecture_is_recorded_as_failed_and_the_series_stays_readable(
    tmp_path, tiny_tokenizer
):
    series, wider = _series_with_a_wider_checkpoint(tmp_path, tiny_tokenizer)
    store = tmp_path / "store"
    track_steps(_request(series, store))
    shutil.copytree(wider, series / WIDER)

    result = track_steps(_request(series, store))
    assert [name for name, _ in result.failed] == [WIDER]
    reason = result.failed[0][1]
    assert "2 layers x 8 heads" in reason and "2 x 4" in reason and "series of its own" in reason, reason
    assert "\n" not in reason
    stored = set(read_table(store, "checkpoints").column("revision").to_pylist())
    assert stored == set(NAMES)
    view = SeriesView.open(store, series.name)
    assert view.revisions == NAMES and view.set_aside == ()
    assert series_findings(store, series.name, "ahon_ln").n_checkpoints == len(NAMES)
    render_report(store, series.name, tmp_path / "reports")
    assert not repair_store(store).dropped


def test_a_store_that_took_the_changed_checkpoint_is_read_without_it(tmp_path, tiny_tokenizer, monkeypatch):
    """As an older version wrote it: the check skipped, the wider checkpoint's rows stored beside the others.
    Before, findings, report and repair all exited with "head (layer 0, head_index 4) appears not at all"."""
    series, wider = _series_with_a_wider_checkpoint(tmp_path, tiny_tokenizer)
    store = tmp_path / "store"
    track_steps(_request(series, store))
    shutil.copytree(wider, series / WIDER)
    from dormant_tasks.tracking import checkpoint_work

    monkeypatch.setattr(checkpoint_work, "architecture_change", lambda *a: None)  # the older version's write
    track_steps(_request(series, store))
    monkeypatch.undo()
    assert WIDER in set(read_table(store, "checkpoints").column("revision").to_pylist())

    view = SeriesView.open(store, series.name)
    assert view.revisions == NAMES and view.set_aside == (WIDER,)
    assert series_findings(store, series.name, "ahon_ln").n_checkpoints == len(NAMES)
    render_report(store, series.name, tmp_path / "reports")
    assert not repair_store(store).dropped
    tracker.derive_series(_request(series, store))  # re-derivation over what is read
