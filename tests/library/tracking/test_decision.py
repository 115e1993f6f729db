"""The confident-state decision out of the append (`tracking.decision`): appends leave it pending, and what any
reader gets is what a whole derivation of the same store stores (the oracle: `rederive` on a copy whose derived
files are gone), whether the read stores the decision, cannot (a published store, a series another process
holds), or `store repair` takes it; status never shows a pending decision as a count."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

import dormant_tasks.tracking.decision as decision
from dormant_tasks import tracking as tracker
from dormant_tasks.findings import series_findings
from dormant_tasks.store import read_metadata
from dormant_tasks.store.layout import PUBLISHED
from dormant_tasks.tracking.decision import transitions_metadata
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView
from tests.library.tracking.test_derive_incremental import MODEL, T0, oracle, revisions, store_checkpoint, taus_store


@pytest.fixture
def series_store(tmp_path):
    return taus_store(tmp_path)


def appended(store, n: int, seed: int = 11, start=T0) -> None:
    """n checkpoints stored one by one, each followed by `derive_series` (an append), in a shuffled order, nothing
    read in between: the decision stays pending from the second append on."""
    request = TrackRequest(source=MODEL, store=str(store), report=False)
    rng = random.Random(seed)
    order = revisions()[:n]
    rng.shuffle(order)
    for i, c in enumerate(order):
        store_checkpoint(store, c, rng, start + timedelta(minutes=i))
        tracker.derive_series(request)


def whole(store, tmp_path, name: str = "whole"):
    """The oracle: a copy of the store with its derived files removed, derived again in one piece."""
    copy = tmp_path / name
    shutil.copytree(store, copy)
    for table in ("transitions", "head_histories"):
        shutil.rmtree(copy / table)
    tracker.rederive(copy, MODEL)
    view = SeriesView.open(copy, MODEL)
    assert not view.decision_pending()  # a whole derivation decides at once
    return view.stored_transitions(), view.histories()


def test_appends_leave_the_decision_pending_and_the_first_read_gives_the_whole_derivation(series_store, tmp_path):
    appended(series_store, 9)
    view = SeriesView.open(series_store, MODEL)
    assert view.decision_pending()
    pending = view.stored_transitions()
    assert pending.column("confident").null_count == pending.num_rows > 0  # nothing stale on show: all null
    want_t, want_h = whole(series_store, tmp_path)
    assert pending.drop_columns(DECIDED).equals(want_t.drop_columns(DECIDED))  # the same mask changes and blips
    got = view.transitions()
    assert got.equals(want_t) and view.histories().equals(want_h)
    assert got.equals(oracle(series_store)[0])  # and what `derive_transitions` of every checkpoint gives
    assert 0 < sum(got.column("confident").to_pylist()) < got.num_rows
    assert not view.decision_pending() and view.stored_transitions().equals(want_t)  # stored: decided once
    assert set(transitions_metadata(view)) == set(read_metadata(tmp_path / "whole", "transitions", MODEL, KEY))


def test_a_read_that_cannot_store_the_decision_decides_in_memory(series_store, tmp_path):
    appended(series_store, 7)
    want = whole(series_store, tmp_path)[0]
    (series_store / PUBLISHED).write_text("{}")  # a published series: read-only
    view = SeriesView.open(series_store, MODEL)
    assert view.transitions().equals(want) and view.transitions(["awft"]).equals(
        want.filter(want.column("score_fn").to_numpy(zero_copy_only=False) == "awft")
    )
    assert view.decision_pending()  # nothing written
    (series_store / PUBLISHED).unlink()
    holder = textwrap.dedent(
        f"""
        import sys, time
        from dormant_tasks.store import hold_series
        with hold_series({str(series_store)!r}, {MODEL!r}):
            print("held", flush=True)
            sys.stdin.read()
        """
    )
    other = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        assert view.transitions().equals(want)  # another run holds the series: no wait, nothing written
        assert view.decision_pending()
    finally:
        other.communicate("", timeout=30)
    assert view.transitions().equals(want) and not view.decision_pending()  # free again: stored


def test_store_repair_takes_a_pending_decision(series_store, tmp_path):
    from flows.cli import main

    appended(series_store, 6)
    want_t, want_h = whole(series_store, tmp_path)
    assert main(["store", "repair", "--store", str(series_store)]) == 0
    view = SeriesView.open(series_store, MODEL)
    assert not view.decision_pending()
    assert view.stored_transitions().equals(want_t) and view.histories().equals(want_h)
    # a damaged transitions file: repair derives it again in one piece, the same tables
    appended(series_store, 9, seed=3, start=T0 + timedelta(days=1))  # re-analysed: new results, new pairs
    path = series_store / "transitions" / next(p.name for p in (series_store / "transitions").iterdir())
    (next(path.iterdir())).write_bytes(b"not parquet")
    assert main(["store", "repair", "--store", str(series_store)]) == 0
    want_t, want_h = whole(series_store, tmp_path, "whole-again")
    view = SeriesView.open(series_store, MODEL)
    assert view.stored_transitions().equals(want_t) and view.histories().equals(want_h)


def test_status_counts_without_deciding_and_findings_decide_alike(series_store, tmp_path, monkeypatch):
    from flows.cli.status import series_line

    appended(series_store, 8)
    found_pending = series_findings(series_store, MODEL, "ahon_ln").transitions
    real = decision.confirm_transitions
    monkeypatch.setattr(decision, "confirm_transitions", lambda *a, **k: pytest.fail("status decided"))
    line = series_line(series_store, MODEL)
    assert "which are confident not decided since the last append: `dormant report` decides and stores it" in line
    assert " confident at " not in line
    monkeypatch.setattr(decision, "confirm_transitions", real)
    SeriesView.open(series_store, MODEL).transitions()  # decided and stored
    line = series_line(series_store, MODEL)
    want = whole(series_store, tmp_path, "whole-after")[0]
    n = sum(
        c is True and f == "ahon_ln" for c, f in zip(*(want.column(k).to_pylist() for k in ("confident", "score_fn")))
    )
    assert f"({n} confident at BH q <= 0.05 over 12 heads," in line
    found = series_findings(series_store, MODEL, "ahon_ln").transitions  # findings decide afresh, alike
    fields = ("n_transitions", "n_confident", "n_blips", "n_confident_blips", "n_selected", "state_level")
    assert [getattr(found, f) for f in fields] == [getattr(found_pending, f) for f in fields]
    assert found.n_confident == n


DECIDED = ["confident", "confident_q", "head_p", "state_p", "from_confident_revision", "to_confident_revision"]
KEY = "transitions-taus-cal"
