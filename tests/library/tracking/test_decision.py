"""The confident-state decision out of the append (`tracking.decision`): appends leave it pending, and what any
reader gets is what a whole derivation of the same store stores (the oracle: `rederive` on a copy whose derived
files are gone), whether a plain read decides it in memory or a run holding the series stores it (a track run's
report); `store repair` keeps it pending and whole; a publication holds it decided; status never shows a pending
decision as a count."""

from __future__ import annotations

import json
import random
import shutil
from datetime import timedelta

import pyarrow.compute as pc
import pytest

import dormant_tasks.tracking.decision as decision
from dormant_tasks import tracking as tracker
from dormant_tasks.findings import series_findings
from dormant_tasks.statistics import paired_changes
from dormant_tasks.store import hold_series, read_metadata
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
    with hold_series(copy, MODEL):  # a run's read (a track run's report) decides and stores it
        SeriesView.open(copy, MODEL).transitions()
    view = SeriesView.open(copy, MODEL)
    assert not view.decision_pending()
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
    assert view.decision_pending()  # a plain read wrote nothing
    with hold_series(series_store, MODEL):
        assert view.transitions().equals(want_t)
    assert not view.decision_pending() and view.stored_transitions().equals(want_t)  # stored by the run
    assert set(transitions_metadata(view)) == set(read_metadata(tmp_path / "whole", "transitions", MODEL, KEY))


def test_a_plain_read_decides_in_memory_and_a_run_holding_the_series_stores_the_decision(series_store, tmp_path):
    appended(series_store, 7)
    want = whole(series_store, tmp_path)[0]
    files = {p: p.stat().st_mtime_ns for p in series_store.rglob("*") if p.is_file()}
    view = SeriesView.open(series_store, MODEL)
    awft = want.filter(pc.equal(want.column("score_fn"), "awft"))
    assert view.transitions().equals(want) and view.transitions(["awft"]).equals(awft)
    assert view.decision_pending()  # a read takes no lock and writes nothing: decided again on the next read
    assert {p: p.stat().st_mtime_ns for p in series_store.rglob("*") if p.is_file()} == files
    (series_store / PUBLISHED).write_text("{}")  # a published series: the same
    assert view.transitions().equals(want) and view.decision_pending()
    (series_store / PUBLISHED).unlink()
    with hold_series(series_store, MODEL):  # a run (a track run's report) stores it: paid once
        assert view.transitions().equals(want)
    assert not view.decision_pending() and view.stored_transitions().equals(want)


def test_a_publication_of_a_pending_series_holds_the_decided_transitions(series_store, tmp_path):
    from dormant_tasks.publishing import build_publication, write_publication

    appended(series_store, 7)
    want = whole(series_store, tmp_path)[0]
    out = write_publication(build_publication(series_store, MODEL, license="cc-by-4.0"), tmp_path / "pub", series_store)
    published = SeriesView.open(out, MODEL)
    assert not published.decision_pending() and published.stored_transitions().equals(want)
    assert SeriesView.open(series_store, MODEL).decision_pending()  # the source store as it was


def test_store_repair_keeps_a_pending_decision_and_reads_give_the_whole_derivation(series_store, tmp_path):
    from flows.cli import main

    appended(series_store, 6)
    want_t, want_h = whole(series_store, tmp_path)
    assert main(["store", "repair", "--store", str(series_store)]) == 0
    view = SeriesView.open(series_store, MODEL)
    assert view.decision_pending()  # the store as a clean run leaves it
    assert view.transitions().equals(want_t) and view.histories().equals(want_h)
    # a damaged transitions file: repair derives it again in one piece, the same tables
    appended(series_store, 9, seed=3, start=T0 + timedelta(days=1))  # re-analysed: new results, new pairs
    path = series_store / "transitions" / next(p.name for p in (series_store / "transitions").iterdir())
    (next(path.iterdir())).write_bytes(b"not parquet")
    assert main(["store", "repair", "--store", str(series_store)]) == 0
    want_t, want_h = whole(series_store, tmp_path, "whole-again")
    view = SeriesView.open(series_store, MODEL)
    assert view.transitions().equals(want_t) and view.histories().equals(want_h)


def test_status_counts_without_deciding_and_findings_decide_alike(series_store, tmp_path, monkeypatch):
    from flows.cli.status import series_line

    appended(series_store, 8)
    found_pending = series_findings(series_store, MODEL, "ahon_ln").transitions
    real = decision.state_decisions
    monkeypatch.setattr(decision, "state_decisions", lambda *a, **k: pytest.fail("status decided"))
    line = series_line(series_store, MODEL)
    assert "(confident ones not decided yet: the report decides them," in line
    assert " confident at " not in line
    monkeypatch.setattr(decision, "state_decisions", real)
    with hold_series(series_store, MODEL):  # a run's read: decided and stored
        SeriesView.open(series_store, MODEL).transitions()
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
    # the decided file records how the clusters were made; the findings carry them, the reach and the paired changes
    made = json.loads(read_metadata(series_store, "transitions", MODEL, KEY)["dormant.clusters"])["ahon_ln"]
    assert made["source"] in ("given", "inferred", "absent") and made["clusters"] == found.clusters.record()["clusters"]
    assert found.reach is not None and found.reach.n_clusters == made["clusters"]
    (s,) = SeriesView.open(series_store, MODEL).states(["ahon_ln"])
    want_p = paired_changes(s.inactive, found.clusters.labels, s.predecessor)
    assert found.paired is not None and (found.paired.p == want_p.p).all() and found.paired.n_clusters > 1


DECIDED = ["confident", "confident_q", "head_p", "state_p", "from_confident_revision", "to_confident_revision"]
KEY = "transitions-taus-cal"


def test_appends_at_the_end_update_the_histories_without_rebuilding_them(series_store, monkeypatch):
    """Checkpoints arriving in series order (stage 1, then each stage-2 branch from stage 1's end): every append
    updates the stored histories from the new pair alone (never `states_from_transitions` over the series), and
    they equal the whole-series oracle each time."""
    import dormant_tasks.tracking.derive as derive

    request = TrackRequest(source=MODEL, store=str(series_store), report=False)
    rebuilt: list[int] = []
    real = derive.states_from_transitions
    monkeypatch.setattr(derive, "states_from_transitions", lambda *a: rebuilt.append(1) or real(*a))
    rng = random.Random(21)
    for i, c in enumerate(revisions()):
        store_checkpoint(series_store, c, rng, T0 + timedelta(minutes=i))
        tracker.derive_series(request)
        view = SeriesView.open(series_store, MODEL)
        want_t, want_h = oracle(series_store)
        assert view.histories().equals(want_h), c["revision"]
        assert view.transitions().equals(want_t), c["revision"]
    assert rebuilt == [1]  # the second checkpoint only (the first's histories record no pair)
