"""Agreement between calibration sets (`dormant_tasks.tracking.agreement`) on hand-built stores: counts and Jaccard
against hand-computed masks, the incremental update against a from-scratch computation (and what it reads),
and the report's "Calibration sets" section."""

from __future__ import annotations

import itertools
import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow.parquet as pq
import pytest

from dormant_tasks import store as S
from dormant_tasks import tracking as tracker
from dormant_tasks.engine.score_functions import SCORING_VERSION
from dormant_tasks.names import series_slug
from dormant_tasks.reporting.report import render_report
from dormant_tasks.tracking import agreement as A
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView

MODEL = "test-org/agreement"
LAYERS, HEADS = 2, 3
T0 = datetime(2025, 1, 1, tzinfo=UTC)
SETS = ("cal-a", "cal-b", "cal-c")


def rev(step: int) -> dict:
    return dict(revision=f"stage1-step{step}-tokens{step * 10}B", stage=1, step=step, tokens=step * 10 * 10**9)


def write_taus(store, sets=SETS, fns_of=None) -> None:
    """Taus rows for every set (the first is the primary); `fns_of`: set -> its score functions."""
    rows = [
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
            calibration_id=cal,
            taus_id=f"taus-{cal}",
        )
        for cal in sets
        for fn in (fns_of or {}).get(cal, ("ahon_ln", "awft"))
    ]
    S.write_table(store, "taus", rows, file_key="taus", model_id=MODEL)


def commit(store, c: dict, cal: str, dormant: dict[str, set], when: datetime) -> None:
    """One (revision, set) result; dormant: score_fn -> the dormant (layer, head) pairs."""
    common = dict(model_id=MODEL, **c)
    heads = [
        dict(
            common,
            score_fn=fn,
            layer=layer,
            head_index=head,
            score=0.0,
            score_std=0.0,
            tau=0.5,
            direction="<",
            dormant_rate=float((layer, head) in mask),
            dormant=(layer, head) in mask,
            calibration_id=cal,
            taus_id=f"taus-{cal}",
        )
        for fn, mask in dormant.items()
        for layer, head in itertools.product(range(LAYERS), range(HEADS))
    ]
    row = dict(
        common,
        commit=f"sha-{c['revision']}",
        n_layers=LAYERS,
        n_heads=HEADS,
        calibration_id=cal,
        n_inputs=8,
        dtype="float32",
        device="cpu",
        seconds=1.0,
        analyzed_at=when,
        code_version="0",
        taus_id=f"taus-{cal}",
        scoring_version=SCORING_VERSION,
        ingredient=None,
    )
    S.commit_checkpoint(store, row, S.conform(heads, "head_scores"))


def agreement_file(store):
    return store / "calibration_agreement" / f"series={series_slug(MODEL)}" / "calibration_agreement.parquet"


def row_of(table, revision, fn, a, b) -> dict:
    rows = [
        r
        for r in table.to_pylist()
        if (r["revision"], r["score_fn"], r["calibration_a"], r["calibration_b"]) == (revision, fn, a, b)
    ]
    assert len(rows) == 1, rows
    return rows[0]


def same_rows(a, b) -> bool:
    """Table equality with NaN equal to NaN (the Jaccard of two empty masks)."""
    keep = [c for c in a.column_names if c != "jaccard"]
    ja, jb = (t.column("jaccard").to_numpy() for t in (a, b))
    return a.select(keep).equals(b.select(keep)) and np.array_equal(ja, jb, equal_nan=True)


def test_counts_and_jaccard_match_hand_computed_masks(tmp_path):
    store = tmp_path / "store"
    write_taus(store, fns_of={"cal-a": ("ahon_ln", "awft"), "cal-b": ("ahon_ln", "awft"), "cal-c": ("ahon_ln",)})
    c1, c2 = rev(100), rev(200)
    masks = {
        "cal-a": {"ahon_ln": {(0, 0), (0, 1), (1, 2)}, "awft": set()},
        "cal-b": {"ahon_ln": {(0, 1), (1, 2), (1, 0)}, "awft": set()},
        "cal-c": {"ahon_ln": {(0, 1)}},
    }
    for k, cal in enumerate(SETS):
        commit(store, c1, cal, masks[cal], T0 + timedelta(minutes=k))
    # c2 only on a and b: all/any over those two
    commit(store, c2, "cal-a", {"ahon_ln": {(0, 0)}, "awft": {(1, 1)}}, T0 + timedelta(minutes=5))
    commit(store, c2, "cal-b", {"ahon_ln": set(), "awft": {(1, 1), (0, 2)}}, T0 + timedelta(minutes=6))
    t = A.set_agreement(store, MODEL)
    assert t.schema == S.SCHEMAS["calibration_agreement"]
    # c1: ahon_ln over 3 pairs; awft only a-b (c has no awft); c2: both functions, a-b only
    assert t.num_rows == 3 + 1 + 2
    # series order, then the paper's order of functions (awft before ahon_ln), then pairs in set order
    assert [(r["revision"], r["score_fn"], r["calibration_a"], r["calibration_b"]) for r in t.to_pylist()] == [
        (c1["revision"], "awft", "cal-a", "cal-b"),
        (c1["revision"], "ahon_ln", "cal-a", "cal-b"),
        (c1["revision"], "ahon_ln", "cal-a", "cal-c"),
        (c1["revision"], "ahon_ln", "cal-b", "cal-c"),
        (c2["revision"], "awft", "cal-a", "cal-b"),
        (c2["revision"], "ahon_ln", "cal-a", "cal-b"),
    ]
    ab = row_of(t, c1["revision"], "ahon_ln", "cal-a", "cal-b")
    assert (ab["n_heads"], ab["n_dormant_a"], ab["n_dormant_b"], ab["n_both"]) == (6, 3, 3, 2)
    assert ab["jaccard"] == pytest.approx(2 / 4)
    # over all three sets at c1: dormant on all = {(0, 1)}; on any = {(0,0), (0,1), (1,2), (1,0)}
    assert (ab["n_sets"], ab["n_dormant_all"], ab["n_dormant_any"]) == (3, 1, 4)
    ac = row_of(t, c1["revision"], "ahon_ln", "cal-a", "cal-c")
    assert (ac["n_both"], ac["jaccard"]) == (1, pytest.approx(1 / 3))
    bc = row_of(t, c1["revision"], "ahon_ln", "cal-b", "cal-c")
    assert (bc["n_both"], bc["jaccard"], bc["n_dormant_all"]) == (1, pytest.approx(1 / 3), 1)
    empty = row_of(t, c1["revision"], "awft", "cal-a", "cal-b")  # both masks empty: Jaccard undefined, not 1
    assert (empty["n_both"], empty["n_sets"], empty["n_dormant_any"]) == (0, 2, 0)
    assert math.isnan(empty["jaccard"])
    one_empty = row_of(t, c2["revision"], "ahon_ln", "cal-a", "cal-b")
    assert (one_empty["n_dormant_a"], one_empty["n_dormant_b"], one_empty["jaccard"]) == (1, 0, 0.0)
    assert (one_empty["n_dormant_all"], one_empty["n_dormant_any"]) == (0, 1)
    aw = row_of(t, c2["revision"], "awft", "cal-a", "cal-b")
    assert (aw["n_both"], aw["jaccard"], aw["n_dormant_all"], aw["n_dormant_any"]) == (1, 0.5, 1, 2)
    assert aw["tokens"] == c2["tokens"] and aw["step"] == 200 and aw["model_id"] == MODEL


def random_masks(rng: random.Random) -> dict[str, set]:
    heads = list(itertools.product(range(LAYERS), range(HEADS)))
    return {fn: {h for h in heads if rng.random() < 0.4} for fn in ("ahon_ln", "awft")}


def test_update_is_incremental_and_equals_a_computation_from_scratch(tmp_path, monkeypatch):
    store = tmp_path / "store"
    write_taus(store)
    rng = random.Random(5)
    when = T0
    order = [rev(s) for s in (300, 100, 500, 200)]  # out of training order
    for c in order[:3]:
        for cal in SETS:
            when += timedelta(minutes=1)
            commit(store, c, cal, random_masks(rng), when)
    assert A.update_agreement(store, MODEL) == 3
    path = agreement_file(store)
    assert same_rows(pq.read_table(path), A.set_agreement(store, MODEL))
    assert A.AGREEMENT_KEY in S.read_metadata(store, "calibration_agreement", MODEL, A.AGREEMENT_FILE)

    read: list[tuple[str, list[str]]] = []
    real = SeriesView.head_scores

    def spy(self, score_fns=None, revisions=None, columns=None):
        read.append((self.calibration_id, list(self.revisions if revisions is None else revisions)))
        return real(self, score_fns, revisions, columns)

    monkeypatch.setattr(SeriesView, "head_scores", spy)
    mtime = path.stat().st_mtime_ns
    assert A.update_agreement(store, MODEL) == 0  # nothing new: nothing read, nothing written
    assert read == [] and path.stat().st_mtime_ns == mtime

    new = order[3]  # a new checkpoint on every set: only its rows are computed
    for cal in SETS:
        when += timedelta(minutes=1)
        commit(store, new, cal, random_masks(rng), when)
    assert A.update_agreement(store, MODEL) == 1
    assert sorted(read) == [(cal, [new["revision"]]) for cal in SETS]
    assert same_rows(pq.read_table(path), A.set_agreement(store, MODEL))

    read.clear()  # a re-analysed (revision, set): that revision again, every set of it
    commit(store, order[0], "cal-b", random_masks(random.Random(99)), when + timedelta(hours=1))
    assert A.update_agreement(store, MODEL) == 1
    assert sorted(read) == [(cal, [order[0]["revision"]]) for cal in SETS]
    got = pq.read_table(path)
    assert same_rows(got, A.set_agreement(store, MODEL))
    assert got.num_rows == 4 * 2 * 3  # checkpoints x functions x pairs
    steps = got.column("step").to_pylist()
    assert steps == sorted(steps)  # series order


def test_derive_series_writes_the_agreement_of_several_sets_only(tmp_path):
    several, single = tmp_path / "several", tmp_path / "single"
    write_taus(several, sets=SETS[:2])
    write_taus(single, sets=SETS[:1])
    rng = random.Random(2)
    for k, c in enumerate(rev(s) for s in (100, 200)):
        for cal in SETS[:2]:
            commit(several, c, cal, random_masks(rng), T0 + timedelta(minutes=2 * k + (cal == "cal-b")))
        commit(single, c, "cal-a", random_masks(rng), T0 + timedelta(minutes=k))
    tracker.derive_series(TrackRequest(source=MODEL, store=str(several), report=False))
    tracker.derive_series(TrackRequest(source=MODEL, store=str(single), report=False))
    assert same_rows(pq.read_table(agreement_file(several)), A.set_agreement(several, MODEL))
    assert not (single / "calibration_agreement").exists()
    assert A.set_agreement(single, MODEL).num_rows == 0


def test_report_has_a_calibration_sets_section_only_with_several_sets(tmp_path):
    stores = {}
    for name, sets in (("two", SETS[:2]), ("one", SETS[:1])):
        store = tmp_path / name
        write_taus(store, sets=sets)
        rng = random.Random(11)
        when = T0
        for c in (rev(s) for s in (1, 10, 100, 1000)):
            for cal in sets:
                when += timedelta(minutes=1)
                commit(store, c, cal, random_masks(rng), when)
        tracker.derive_series(TrackRequest(source=MODEL, store=str(store), report=False))
        stores[name] = store
    two = render_report(stores["two"], MODEL, out_dir=tmp_path / "report-two")
    html = two.index_html.read_text(encoding="utf-8")
    assert "<h2>Calibration sets</h2>" in html
    for name in ("set_agreement", "set_raster"):
        assert name in two.figures
        assert (two.out_dir / "figures" / f"{name}.png").is_file()
        assert (two.out_dir / "figures" / f"{name}.svg").is_file()
        assert f"figures/{name}.png" in html
    assert "cal-a" in html and "cal-b" in html
    t = A.set_agreement(stores["two"], MODEL)
    last = t.filter(np.array([r == rev(1000)["revision"] for r in t.column("revision").to_pylist()]))
    mean = float(np.nanmean(last.column("jaccard").to_numpy()))
    lines = [line for line in two.markdown.splitlines() if line.startswith("Calibration sets") and "Jaccard" in line]
    assert len(lines) == 1 and "cal-a" in lines[0] and "cal-b" in lines[0] and f"{mean:.2f}" in lines[0]

    one = render_report(stores["one"], MODEL, out_dir=tmp_path / "report-one")
    html = one.index_html.read_text(encoding="utf-8")
    assert "Calibration sets" not in html and "Jaccard" not in one.markdown
    assert not set(one.figures) & {"set_agreement", "set_raster"}
    assert not list((one.out_dir / "figures").glob("set_*"))
