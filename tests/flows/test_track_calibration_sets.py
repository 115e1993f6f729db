"""Several calibration sets in one track run: one model load per checkpoint, each set's results equal to a run
on that set alone, per-set taus, masks and transitions; and the bad inputs of --calibration (one line, exit 2,
nothing written). Real tiny checkpoints, real bundled sets, the library's own steps (no Prefect) where possible."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from dormant_tasks.store.io import read_table
from dormant_tasks.tracking import checkpoint_work, tracker
from dormant_tasks.tracking.agreement import set_agreement
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView
from tests.builders.cli import Result, invoke

SETS = ("winogrande", "code", "wikipedia")
FNS = ("ahon_ln", "lthon_ln", "awft", "ahon")


def library_track(request: TrackRequest) -> None:
    """The one orchestrator of a run, the track flow (in this process: the monkeypatched loader is the one used)."""
    from flows.track import track

    track(request)


@pytest.mark.usefixtures("prefect_harness")
def test_k_sets_load_each_checkpoint_once_and_equal_separate_runs(random_series, tmp_path, monkeypatch):
    loads = []
    real = checkpoint_work.lazy_load_checkpoint

    def counting(source, revision, *a, **k):
        loads.append(revision.name)
        return real(source, revision, *a, **k)

    monkeypatch.setattr(checkpoint_work, "lazy_load_checkpoint", counting)
    kw = dict(source=str(random_series), limit=6, score_fns=FNS, report=False)
    together = TrackRequest(store=str(tmp_path / "together"), calibrations=SETS, **kw)
    library_track(together)
    n_ckpts = len(tracker.plan_series(together).selected)
    assert sorted(loads) == sorted(set(loads)) and len(loads) == n_ckpts  # one load per checkpoint, not per set
    cal_ids = [c.calibration_id for c in together.calibration_sets]
    assert SeriesView.calibration_ids(together.store, together.model_id) == cal_ids
    keys = ["revision", "score_fn", "layer", "head_index"]
    order = [(k, "ascending") for k in keys]
    for name, cal_id in zip(SETS, cal_ids):
        alone = TrackRequest(store=str(tmp_path / name), calibrations=(name,), **kw)
        library_track(alone)
        a = read_table(together.store, "head_scores", filters={"calibration_id": cal_id}).sort_by(order)
        b = read_table(alone.store, "head_scores").sort_by(order)
        assert a.num_rows == b.num_rows == n_ckpts * len(FNS) * 2 * 4
        for col in ("score", "score_std", "tau", "dormant_rate"):  # bitwise: each set is batched on its own
            np.testing.assert_array_equal(a.column(col).to_numpy(), b.column(col).to_numpy(), err_msg=col)
        assert a.column("dormant").equals(b.column("dormant")) and set(a.column("taus_id").to_pylist()) == set(
            b.column("taus_id").to_pylist()
        )
        ta = SeriesView.open(together.store, together.model_id, cal_id).transitions().sort_by(order)
        tb = SeriesView.open(alone.store, alone.model_id).transitions().sort_by(order)
        assert ta.select(keys + ["from_state", "to_state"]).equals(tb.select(keys + ["from_state", "to_state"]))
    # the agreement of the three sets: every checkpoint, function and pair, as computed from scratch
    agreement = read_table(together.store, "calibration_agreement")
    scratch = set_agreement(together.store, together.model_id)  # NaN Jaccard (two empty masks) compares unequal
    assert agreement.drop_columns(["jaccard"]).equals(scratch.drop_columns(["jaccard"]))
    assert np.array_equal(agreement.column("jaccard").to_numpy(), scratch.column("jaccard").to_numpy(), equal_nan=True)
    assert agreement.num_rows == n_ckpts * len(FNS) * 3
    # the sets have taus of their own (quantiles of their own reference scores)
    taus = read_table(together.store, "taus")
    assert len(set(taus.column("calibration_id").to_pylist())) == 3
    assert len(set(taus.column("taus_id").to_pylist())) == 3
    # a rerun with the same sets answers from the store; another order or set is refused with the fix
    assert tracker.series_state(together).done
    swapped = TrackRequest(store=together.store, calibrations=SETS[::-1], **kw)
    with pytest.raises(Exception, match="tracked with calibration set"):
        tracker.series_state(swapped)
    # naming no set at all, a run takes the series' own three (not the default one, which it would refuse)
    state = tracker.series_state(TrackRequest(store=together.store, **kw))
    assert state.done and state.request.calibration_sets == together.calibration_sets


@pytest.fixture
def _cli(prefect_api_url):
    """`dormant ARGS` in-process (tests/builders/cli.py), its flows on the session's Prefect test server."""

    def run(*args: str, cwd: Path) -> Result:
        return invoke(args, cwd=cwd, env={"PREFECT_API_URL": prefect_api_url, "HF_HUB_OFFLINE": "1"})

    return run


@pytest.mark.parametrize("case", ["unknown", "typo", "empty", "not-utf8", "twice"])
def test_bad_calibration_sets_are_one_line_exit_2_and_write_nothing(case, random_series, tmp_path, _cli):
    store = tmp_path / "store"
    bad = tmp_path / "texts.txt"
    args, needle = ["--calibration", "winogrande"], ""
    if case == "unknown":
        args, needle = ["--calibration", "poetry"], "winogrande, wikipedia, mmlu, hellaswag, gsm8k, code"
    elif case == "typo":
        args, needle = ["--calibration", "wikipeda"], 'did you mean "wikipedia"'
    elif case == "empty":
        bad.write_text("\n  \n", encoding="utf-8")
        args, needle = ["--calibration", "winogrande", "--calibration", str(bad)], "holds no text"
    elif case == "not-utf8":
        bad.write_bytes(b"caf\xe9 au lait\n")
        args, needle = ["--calibration", str(bad)], "not UTF-8"
    elif case == "twice":
        bad.write_text("\n".join(f"text number {i}" for i in range(10)), encoding="utf-8")
        copy = tmp_path / "copy.txt"
        copy.write_text(bad.read_text(encoding="utf-8"), encoding="utf-8")
        args, needle = ["--calibration", str(bad), "--calibration", str(copy)], "same"
    r = _cli(
        "track",
        "--model",
        str(random_series),
        "--store",
        str(store),
        "--no-report",
        "--scores",
        "ahon_ln",
        *args,
        cwd=tmp_path,
    )
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.code == 2, r.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("dormant track: error: ") and needle in lines[0], lines
    assert not store.exists(), sorted(str(p) for p in store.rglob("*"))


def _store_digest(store: Path) -> dict[str, str]:
    """Every file of the store, by path relative to it, with the sha256 of its bytes (the series locks aside:
    they hold the pid of their last holder, no data)."""
    return {
        str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(store.rglob("*"))
        if p.is_file() and "_locks" not in p.parts
    }


@pytest.mark.slow
def test_texts_longer_than_the_context_are_truncated_with_a_warning_as_score_does(random_series, tmp_path, _cli):
    """One truncation rule for `score` and `track` (docs/USAGE.md): a text past the model's context (even every text of
    the set, even one 200,000-character line) is cut to it and counted in one warning, never refused."""
    long = tmp_path / "long.txt"  # the tiny model's context is 512 tokens (tiny_config)
    long.write_text("word " * 40_000 + "\n" + "a short text\n", encoding="utf-8")
    assert len(long.read_text(encoding="utf-8").splitlines()[0]) == 200_000
    args = ["--model", str(random_series), "--store", str(tmp_path / "store"), "--no-report", "--scores", "ahon_ln"]
    r = _cli("track", *args, "--calibration", str(long), "--steps", "0:0", cwd=tmp_path)
    assert r.code == 0, r.stderr[-3000:]
    # named by its calibration set, in the singular for one input
    from dormant_tasks.tracking.calibration import load_calibration

    cal = load_calibration(str(long)).calibration_id
    assert f"warning: calibration set {cal}: 1 input longer than the model's context" in r.stderr, r.stderr[-3000:]
    assert "1 checkpoints analysed" in r.stdout
    out = tmp_path / "scores.parquet"
    r = _cli(
        "score",
        "--model",
        str(random_series / "stage1-step0-tokens0K"),
        "--texts",
        str(long),
        "--out",
        str(out),
        "--scores",
        "ahon_ln",
        cwd=tmp_path,
    )
    assert r.code == 0 and "1 of 2 inputs (0) were cut to their first 512 tokens" in r.stderr, r.stderr[-3000:]


@pytest.mark.slow
def test_retau_whose_first_checkpoint_cannot_be_scored_writes_nothing(random_series, tmp_path, _cli):
    """A --retau of a stored series with fixed taus only (no reference to score) and a new calibration set scores
    its first selected checkpoint before it writes the taus: when that checkpoint cannot be loaded, one line,
    exit 2, and the store byte for byte as it was (its taus and request still those of the results it holds).
    (The checkpoint the taus come from is not one to skip: without it the run has no taus.)"""
    import shutil

    series = Path(shutil.copytree(random_series, tmp_path / "random-olmo2"))
    store = tmp_path / "store"
    common = ["--model", str(series), "--store", str(store), "--no-report", "--scores", "ahon_ln"]
    first = _cli("track", *common, "--limit", "4", cwd=tmp_path)
    assert first.code == 0, first.stderr[-3000:]
    before = _store_digest(store)
    assert any(name.startswith("taus/") for name in before), sorted(before)
    weights = series / "stage1-step0-tokens0K" / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 3)
    r = _cli("track", *common, "--retau", "--tau", "ahon_ln=0.4", "--calibration", "code", cwd=tmp_path)
    lines = [line for line in r.stderr.splitlines() if line.strip() and " elapsed" not in line]
    assert r.code == 2, r.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("dormant track: error: "), lines
    assert "the file is cut short" in lines[0], lines
    assert _store_digest(store) == before
