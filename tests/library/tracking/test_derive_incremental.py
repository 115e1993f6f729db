"""Incremental derivation of transitions and histories (`tracker.derive_series`) against the whole-series
oracle (`derive_transitions` + `mark_blips` / `head_histories` of every checkpoint's head_scores), on a
hand-built store whose checkpoints arrive out of order, on stage-2 branches, and re-analysed; plus what
one append reads."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from dormant_tasks import store as S
from dormant_tasks import tracking as tracker
from dormant_tasks.engine.score_functions import SCORING_VERSION
from dormant_tasks.errors import ConfigError
from dormant_tasks.names import series_slug
from dormant_tasks.statistics.confidence import pack_inputs
from dormant_tasks.tracking.decision import RATE_COLUMNS
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView
from dormant_tasks.tracking.transitions import (
    confirm_transitions,
    derive_transitions,
    dormant_matrices,
    head_histories,
    mark_blips,
)

MODEL = "test-org/incremental"
FNS = ("ahon_ln", "awft")
LAYERS, HEADS = 3, 4
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def revisions() -> list[dict]:
    """Stage 1 (8 checkpoints), two stage-2 ingredients of 2 checkpoints each (branches from stage 1's end)."""
    out = [
        dict(revision=f"stage1-step{s}-tokens{s * 2}B", stage=1, step=s, tokens=s * 2, ingredient=None)
        for s in range(100, 900, 100)
    ]
    for ing in (1, 2):
        out += [
            dict(revision=f"stage2-ingredient{ing}-step{s}-tokens{s}B", stage=2, step=s, tokens=s, ingredient=ing)
            for s in (10, 20)
        ]
    return out


def store_checkpoint(store, c: dict, rng: random.Random, when: datetime) -> None:
    """Random states with per-input indicators (32 inputs) that agree with them, so the paired tests and their
    q-values are derived too."""
    common = dict(model_id=MODEL, **{k: c[k] for k in ("revision", "stage", "step", "tokens")})
    heads = []
    for fn in FNS:
        for layer in range(LAYERS):
            for head in range(HEADS):
                rate = rng.choice([0.9, 0.1, 0.5])  # clearly dormant, clearly active, or either by chance
                inactive = np.array([rng.random() < rate for _ in range(32)])
                heads.append(
                    dict(
                        common,
                        score_fn=fn,
                        layer=layer,
                        head_index=head,
                        score=0.0,
                        score_std=0.0,
                        tau=0.5,
                        direction="<",
                        dormant_rate=float(inactive.mean()),
                        dormant=bool(inactive.mean() >= 0.5),
                        inactive_inputs=pack_inputs(inactive)[0],
                        calibration_id="cal",
                        taus_id="taus",
                    )
                )
    row = dict(
        common,
        commit=f"sha-{c['revision']}",
        n_layers=LAYERS,
        n_heads=HEADS,
        calibration_id="cal",
        n_inputs=32,
        dtype="float32",
        device="cpu",
        seconds=1.0,
        analyzed_at=when,
        code_version="0",
        taus_id="taus",
        scoring_version=SCORING_VERSION,
        ingredient=c["ingredient"],
    )
    S.commit_checkpoint(store, row, S.conform(heads, "head_scores"))


@pytest.fixture
def series_store(tmp_path):
    return taus_store(tmp_path)


def taus_store(tmp_path):
    """A store holding the series' taus alone (fixed: no checkpoint needed)."""
    store = tmp_path / "store"
    taus = [
        dict(
            model_id=MODEL,
            revision="main",
            stage=-1,
            step=-1,
            tokens=-1,
            score_fn=fn,
            tau=0.5,
            direction="<",
            source="fixed",
            calibration_id="cal",
            taus_id="taus",
        )
        for fn in FNS
    ]
    S.write_table(store, "taus", taus, file_key="taus")
    return store


def oracle(store):
    view = SeriesView.open(store, MODEL)
    heads, ckpts = view.head_scores(), view.checkpoints_table()
    return mark_blips(derive_transitions(heads, ckpts)), head_histories(heads, ckpts)


DECIDED = ["confident", "confident_q", "head_p", "state_p", "from_confident_revision", "to_confident_revision"]


def matrices(store):
    view = SeriesView.open(store, MODEL)
    return list(dormant_matrices(view.head_scores(), view.checkpoints_table()))


def stored(store):
    view = SeriesView.open(store, MODEL)
    return view.transitions(), view.histories()


def test_derivation_pair_by_pair_equals_the_whole_series(series_store, monkeypatch):
    request = TrackRequest(source=MODEL, store=str(series_store), report=False)
    rng = random.Random(7)
    order = revisions()
    rng.shuffle(order)  # out of training order: inserts in the middle, a new first checkpoint, new branches
    read: list[list[str]] = []
    light: list[tuple] = []
    real = SeriesView.head_scores

    def spy(self, score_fns=None, revisions=None, columns=None):
        if columns is None:
            read.append(list(self.revisions if revisions is None else revisions))
        else:  # the whole series' rates, for the confident states
            light.append(tuple(columns))
        return real(self, score_fns, revisions, columns)

    monkeypatch.setattr(SeriesView, "head_scores", spy)
    when = T0
    for i, c in enumerate(order):
        when += timedelta(minutes=1)
        store_checkpoint(series_store, c, rng, when)
        read.clear()
        summary = tracker.derive_series(request)
        if i:  # incremental: whole rows of at most the new pairs' checkpoints (and the first one), none of the rest
            assert sum(len(r) for r in read) <= 2 * 2 + 1, read
            assert light == [] and SeriesView.open(series_store, MODEL).decision_pending()
        with S.hold_series(series_store, MODEL):  # as a track run's report: the read decides and stores it, once
            got, want = stored(series_store), oracle(series_store)
        assert light == ([RATE_COLUMNS] if i else [])
        light.clear()
        assert not SeriesView.open(series_store, MODEL).decision_pending()
        assert stored(series_store)[0].equals(got[0]) and light == []
        assert got[0].equals(want[0]), f"transitions after adding {c['revision']}"
        assert got[1].equals(want[1]), f"histories after adding {c['revision']}"
        assert summary.n_transitions == want[0].num_rows
    assert want[0].num_rows > 20  # the random series does change state
    q = want[0].column("confident_q").to_pylist()
    sure = want[0].column("confident").to_pylist()
    assert all(x is not None for x in q) and 0 < sum(sure) < len(q)  # over the whole series
    assert 0 < sum(want[0].column("blip").to_pylist()) < want[0].num_rows  # and has blips, kept right on appends
    # A re-analysed checkpoint (new result, other states) replaces its pairs.
    store_checkpoint(series_store, order[3], random.Random(99), when + timedelta(hours=1))
    tracker.derive_series(request)
    got, want = stored(series_store), oracle(series_store)
    assert got[0].equals(want[0]) and got[1].equals(want[1])


def test_a_rerun_with_nothing_new_reads_and_writes_nothing(series_store, monkeypatch):
    request = TrackRequest(source=MODEL, store=str(series_store), report=False)
    rng = random.Random(1)
    for i, c in enumerate(revisions()[:5]):
        store_checkpoint(series_store, c, rng, T0 + timedelta(minutes=i))
    first = tracker.derive_series(request)
    folder = series_store / "transitions" / f"series={series_slug(MODEL)}"
    mtimes = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    monkeypatch.setattr(SeriesView, "head_scores", lambda *a, **k: pytest.fail("read head_scores"))
    again = tracker.derive_series(request)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == mtimes
    assert (
        (again.n_checkpoints, again.n_transitions)
        == (first.n_checkpoints, first.n_transitions)
        == (5, first.n_transitions)
    )


def test_without_the_pairs_record_the_whole_series_is_derived(series_store):
    """A store derived before the record existed (schema 3): derived once in full, then incrementally."""
    request = TrackRequest(source=MODEL, store=str(series_store), report=False)
    rng = random.Random(3)
    for i, c in enumerate(revisions()[:6]):
        store_checkpoint(series_store, c, rng, T0 + timedelta(minutes=i))
    trans, hist = oracle(series_store)
    S.write_table(series_store, "transitions", trans.slice(0, 1), file_key="transitions-taus", model_id=MODEL)  # stale
    tracker.derive_series(request)
    got = stored(series_store)
    assert got[0].equals(trans) and got[1].equals(hist)
    assert np.all(np.isin(got[0].column("to_revision").to_pylist(), [c["revision"] for c in revisions()[:6]]))


def test_track_fdr_sets_the_stored_rule_and_a_new_rule_decides_again_without_deriving_pairs(series_store, monkeypatch):
    from flows.cli.status import series_line

    rng = random.Random(5)
    for i, c in enumerate(revisions()[:6]):
        store_checkpoint(series_store, c, rng, T0 + timedelta(minutes=i))
    tracker.derive_series(TrackRequest(source=MODEL, store=str(series_store), report=False, fdr=0.5))
    with S.hold_series(series_store, MODEL):  # a run's read (its report): decided and stored
        loose = stored(series_store)[0]
    assert re.search(r"confident at BH q <= 0\.5 over \d+ heads,", series_line(series_store, MODEL))
    read: list = []
    real = SeriesView.head_scores
    monkeypatch.setattr(SeriesView, "head_scores", lambda self, *a, **k: read.append(k) or real(self, *a, **k))
    request = TrackRequest(source=MODEL, store=str(series_store), report=False, fdr_method="by")
    tracker.derive_series(request)  # the default level 0.05, by Benjamini-Yekutieli
    assert [k.get("columns") is None for k in read] == [True]  # the first checkpoint; the decision waits for a read
    assert "(confident ones not decided yet: the report decides them," in series_line(series_store, MODEL)
    read.clear()  # (status read two checkpoints and one column)
    with S.hold_series(series_store, MODEL):  # a run's read (its report): decided and stored
        strict = stored(series_store)[0]
    assert [k.get("columns") for k in read] == [list(RATE_COLUMNS)]  # the rates, once
    assert strict.drop_columns(DECIDED).equals(loose.drop_columns(DECIDED))  # the same mask changes ...
    assert sum(strict.column("confident").to_pylist()) <= sum(loose.column("confident").to_pylist())  # BY: fewer
    want = confirm_transitions(oracle(series_store)[0], matrices(series_store), 0.05, "by")
    for name in want.column_names:
        assert strict.column(name).to_pylist() == want.column(name).to_pylist(), name
    assert re.search(r"confident at BY q <= 0\.05 over \d+ heads,", series_line(series_store, MODEL))
    with pytest.raises(ConfigError, match="--fdr 1.5: a false discovery rate lies between 0 and 1"):
        TrackRequest(source=MODEL, store=str(series_store), fdr=1.5)
    with pytest.raises(ConfigError, match="--fdr-method 'holm': choose one of bh, by"):
        TrackRequest(source=MODEL, store=str(series_store), fdr_method="holm")
