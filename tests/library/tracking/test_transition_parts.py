"""Appends that write parts (`tracking.transition_files`, `store.parts`): an append at the end of a series writes
only its new pairs' rows, as a part of the stored transitions, never the base; every PARTS_MAX parts, and when a
run stores the decision, they are folded into a new base. Whatever the rows' files, what a reader gets is the
whole-series oracle (`derive_transitions` + `mark_blips` of every checkpoint, decided as a whole derivation
decides it); a part of another generation is never read; a damaged part is named with `store repair`, which sets
it aside and derives the transitions again."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest

import dormant_tasks.tracking.transition_files as files
from dormant_tasks import tracking as tracker
from dormant_tasks.errors import StoreError
from dormant_tasks.store import GENERATION_KEY, hold_series, part_files, read_metadata
from dormant_tasks.store.sums import read_sums
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView
from tests.library.tracking.test_decision import DECIDED, KEY, whole
from tests.library.tracking.test_derive_incremental import MODEL, T0, oracle, revisions, store_checkpoint, taus_store


@pytest.fixture
def series_store(tmp_path):
    return taus_store(tmp_path)


def base_path(store):
    return next((store / "transitions").iterdir()) / f"{KEY}.parquet"


def parts_of(store) -> list:
    meta = read_metadata(store, "transitions", MODEL, KEY) or {}
    return part_files(store, "transitions", MODEL, KEY, meta.get(GENERATION_KEY))


def append_in_order(store, n: int, seed: int = 5, start=T0):
    """The first n checkpoints in series order, each stored and derived (an append at the end); yields after each."""
    request = TrackRequest(source=MODEL, store=str(store), report=False)
    rng = random.Random(seed)
    for i, c in enumerate(revisions()[:n]):
        store_checkpoint(store, c, rng, start + timedelta(minutes=i))
        tracker.derive_series(request)
        yield c


def test_appends_write_parts_never_the_base_and_fold_every_parts_max(series_store, monkeypatch):
    monkeypatch.setattr(files, "PARTS_MAX", 3)
    seen = []
    for c in append_in_order(series_store, 9):
        base = base_path(series_store)
        seen.append((len(parts_of(series_store)), base.stat().st_mtime_ns))
        view = SeriesView.open(series_store, MODEL)
        want_t, want_h = oracle(series_store)
        got = view.stored_transitions()
        assert got.drop_columns(DECIDED).equals(want_t.drop_columns(DECIDED)), c["revision"]
        assert view.histories().equals(want_h), c["revision"]
        assert view.decision_pending()
    counts = [n for n, _ in seen]
    # 1st: a base with no pair; 2nd: whole (no stored pair to append to); then 3 parts, a fold, 3 parts
    assert counts == [0, 0, 1, 2, 3, 0, 1, 2, 3]
    for k in (2, 3, 4, 6, 7, 8):  # a part append leaves the base file as it was
        assert seen[k][1] == seen[k - 1][1]
    assert seen[5][1] != seen[4][1]  # the fold writes it
    meta = files.transitions_metadata(SeriesView.open(series_store, MODEL))
    assert meta[files.PARTS_KEY] == "3" and len(json.loads(meta[files.PAIRS_KEY])) == 8
    assert sum(files.stored_counts(meta).values()) == SeriesView.open(series_store, MODEL).stored_transitions().num_rows


def test_a_read_decides_over_the_parts_and_a_run_storing_the_decision_folds_them(series_store, tmp_path):
    for _ in append_in_order(series_store, 7):
        pass
    parts = parts_of(series_store)
    assert len(parts) == 5
    want_t, _ = whole(series_store, tmp_path)
    view = SeriesView.open(series_store, MODEL)
    assert view.transitions().equals(want_t) and parts_of(series_store) == parts  # a plain read writes nothing
    with hold_series(series_store, MODEL):
        assert view.transitions().equals(want_t)
    assert not view.decision_pending() and parts_of(series_store) == []
    assert view.stored_transitions().equals(want_t)
    assert not any(p.exists() for p in parts)
    recorded = read_sums(series_store, MODEL)
    assert not [k for k in recorded if "/_parts/" in k]  # their checksums went with them
    # one more append after a stored decision: a part again, and the read is the whole derivation
    for _ in append_in_order(series_store, 8, start=T0):
        pass
    assert len(parts_of(series_store)) == 1
    assert SeriesView.open(series_store, MODEL).transitions().equals(whole(series_store, tmp_path, "again")[0])


def test_parts_of_another_generation_are_never_read_and_repair_deletes_them(series_store, tmp_path):
    from flows.cli import main

    for _ in append_in_order(series_store, 6):
        pass
    parts = parts_of(series_store)
    want = SeriesView.open(series_store, MODEL).stored_transitions()
    stale = parts[0].parent.parent / "0123456789abcdef"  # a writer killed after a new base, before the delete
    stale.mkdir()
    for p in parts:
        (stale / p.name).write_bytes(p.read_bytes())
    (stale / "9.parquet").write_bytes(parts[-1].read_bytes())
    assert SeriesView.open(series_store, MODEL).stored_transitions().equals(want)
    assert main(["store", "repair", "--store", str(series_store)]) == 0
    assert not stale.exists() and parts_of(series_store) == parts
    assert SeriesView.open(series_store, MODEL).stored_transitions().equals(want)


def test_a_damaged_part_names_repair_which_derives_the_transitions_again(series_store, tmp_path, capsys):
    from flows.cli import main

    for _ in append_in_order(series_store, 7):
        pass
    parts = parts_of(series_store)
    data = bytearray(parts[1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    parts[1].write_bytes(bytes(data))
    with pytest.raises(StoreError) as e:
        SeriesView.open(series_store, MODEL).stored_transitions()
    assert "store file 'transitions/series=" in str(e.value) and "/_parts/" in str(e.value)
    assert "is damaged (its content checksum differs" in str(e.value)
    assert f"run `dormant store repair --store {series_store}`: it moves" in str(e.value)
    assert main(["store", "repair", "--store", str(series_store)]) == 0
    assert "_parts" in capsys.readouterr().out  # the quarantined part, by name
    want_t, want_h = whole(series_store, tmp_path)
    view = SeriesView.open(series_store, MODEL)
    assert parts_of(series_store) == []  # derived again whole
    assert view.transitions().equals(want_t) and view.histories().equals(want_h)


def test_a_run_killed_between_the_part_and_the_histories_is_whole_after_the_rerun(series_store, tmp_path, monkeypatch):
    import dormant_tasks.tracking.derive as derive

    for _ in append_in_order(series_store, 5):
        pass
    request = TrackRequest(source=MODEL, store=str(series_store), report=False)
    store_checkpoint(series_store, revisions()[5], random.Random(99), T0 + timedelta(hours=1))
    real = derive.write_table

    def killed(store, table, *a, **k):
        if table == "head_histories":
            raise KeyboardInterrupt
        return real(store, table, *a, **k)

    monkeypatch.setattr(derive, "write_table", killed)
    with pytest.raises(KeyboardInterrupt):
        tracker.derive_series(request)
    monkeypatch.setattr(derive, "write_table", real)
    tracker.derive_series(request)  # the rerun
    want_t, want_h = whole(series_store, tmp_path)
    view = SeriesView.open(series_store, MODEL)
    assert view.transitions().equals(want_t) and view.histories().equals(want_h)


def test_status_says_when_the_transitions_lag_the_stored_checkpoints(series_store):
    """A run stopped between storing a checkpoint and deriving: status names the lag (it reads metadata only) and
    the next derivation closes it."""
    from flows.cli.status import series_line

    for _ in append_in_order(series_store, 5):
        pass
    assert "transitions derived over" not in series_line(series_store, MODEL)
    store_checkpoint(series_store, revisions()[5], random.Random(3), T0 + timedelta(hours=2))
    line = series_line(series_store, MODEL)
    assert "transitions derived over 5 of 6 checkpoints" in line and "`dormant track` derives them" in line
    tracker.derive_series(TrackRequest(source=MODEL, store=str(series_store), report=False))
    assert "transitions derived over" not in series_line(series_store, MODEL)


def test_a_reader_outside_the_tool_sees_every_row_once_a_run_has_stored_the_decision(series_store):
    """docs/DATA_CONTRACT.md, "Reading the store without this project": while appends' parts and a pending decision
    are on disk, pyarrow's dataset discovery misses the parts' rows and sees `confident` null (never False); the
    API's one call gives every row, decided; after a run holding the series has read them (a `dormant track`
    rerun's report), the plain dataset read is those rows."""
    import pyarrow.dataset as ds

    def outside():  # as the contract's pyarrow example reads a table
        t = ds.dataset(series_store / "transitions", format="parquet", partitioning="hive").to_table()
        return t.drop_columns(["series"]).select(want.column_names).sort_by(order)

    list(append_in_order(series_store, 6))
    assert parts_of(series_store)
    order = [(c, "ascending") for c in ("score_fn", "to_step", "layer", "head_index")]
    want = SeriesView.open(series_store, MODEL).transitions().sort_by(order)
    before = outside()
    assert before.num_rows < want.num_rows and before.column("confident").null_count == before.num_rows
    with hold_series(series_store, MODEL):  # what `dormant track` run again without --no-report does at its report
        SeriesView.open(series_store, MODEL).transitions()
    assert not parts_of(series_store) and outside().equals(want)
