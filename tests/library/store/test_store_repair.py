"""`dormant store repair` and `dormant store gc` on hand-built stores: a file or the manifest deleted by hand,
files of a killed writer, kept per-input scores dropped; and the input-score policy of a track run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from dormant_tasks import store as S
from dormant_tasks.engine.score_functions import SCORING_VERSION
from dormant_tasks.errors import StoreError
from dormant_tasks.names import series_slug
from dormant_tasks.store.input_scores import INPUT_SCORES_AUTO_LIMIT, InputScoresPolicy, keep_input_scores
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView
from flows.cli import main as cli_main

MODEL = "test-org/repair"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def result(store, step: int, keep_inputs: bool = True) -> str:
    common = dict(model_id=MODEL, revision=f"stage1-step{step}-tokens{step}B", stage=1, step=step, tokens=step)
    heads = [
        dict(
            common,
            score_fn="ahon",
            layer=0,
            head_index=h,
            score=0.1,
            score_std=0.0,
            tau=0.5,
            direction="<",
            dormant_rate=1.0,
            dormant=True,
            calibration_id="cal",
            taus_id="taus",
        )
        for h in range(2)
    ]
    inputs = [
        dict(common, input_index=i, score_fn="ahon", layer=0, head_index=h, score=0.1, calibration_id="cal")
        for i in range(3)
        for h in range(2)
    ]
    row = dict(
        common,
        commit=f"sha{step}",
        n_layers=1,
        n_heads=2,
        calibration_id="cal",
        n_inputs=3,
        dtype="float32",
        device="cpu",
        seconds=1.0,
        analyzed_at=T0 + timedelta(seconds=step),
        code_version="0",
        taus_id="taus",
        scoring_version="1",
    )
    S.commit_checkpoint(
        store, row, S.conform(heads, "head_scores"), S.conform(inputs, "input_scores") if keep_inputs else None
    )
    return S.checkpoint_file_key(S.CheckpointKey(common["revision"], f"sha{step}", "cal", "taus", SCORING_VERSION))


def folder(store, table):
    return store / table / f"series={series_slug(MODEL)}"


def result_files(store) -> list[str]:
    return sorted(f"{t}/{p.name}" for t in S.RESULT_TABLES for p in folder(store, t).glob("*.parquet"))


def write_taus(store) -> None:
    taus = dict(
        model_id=MODEL,
        revision="main",
        stage=-1,
        step=-1,
        tokens=-1,
        score_fn="ahon",
        tau=0.5,
        direction="<",
        source="fixed",
        calibration_id="cal",
        taus_id="taus",
    )
    S.write_table(store, "taus", [taus], file_key="taus")


def one_error_line(capsys, command: str, *needles: str) -> str:
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dormant {command}: error: "), lines
    assert all(n in lines[0] for n in needles), lines
    return lines[0]


def test_repair_drops_a_checkpoint_whose_file_was_deleted_and_deletes_orphans(tmp_path, capsys):
    store = tmp_path / "store"
    keys = [result(store, s) for s in (10, 20, 30)]
    write_taus(store)
    (folder(store, "head_scores") / f"{keys[1]}.parquet").unlink()  # deleted by hand
    (folder(store, "input_scores") / f"{keys[2]}.parquet").unlink()
    S.write_table(store, "head_scores", S.read_table(store, "head_scores", filters={"step": 10}), file_key="orphan")
    with pytest.raises(StoreError, match="is missing.*dormant store repair --store"):
        S.read_table(store, "head_scores")
    assert cli_main(["status", "--store", str(store)]) == 2  # one error line per inconsistent series
    one_error_line(capsys, "status", f"{MODEL}: ", "is missing", "dormant store repair --store")

    assert cli_main(["store", "repair", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"dropped {MODEL}@stage1-step20-tokens20B" in out and "unreferenced files deleted" in out
    assert f"{MODEL}@stage1-step30-tokens30B: its input_scores file was missing" in out
    manifest = S.read_table(store, "checkpoints").sort_by("step").to_pylist()
    assert [(r["step"], r["input_scores_kept"]) for r in manifest] == [(10, True), (30, False)]
    assert S.read_table(store, "head_scores").num_rows == 4
    assert sorted(p.stem for p in folder(store, "head_scores").glob("*.parquet")) == sorted([keys[0], keys[2]])
    assert S.stored_checkpoint_keys(store, MODEL) == {
        S.CheckpointKey(f"stage1-step{s}-tokens{s}B", f"sha{s}", "cal", "taus", SCORING_VERSION) for s in (10, 30)
    }  # the next track scores step 20 again
    assert cli_main(["store", "repair", "--store", str(store)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert cli_main(["status", "--store", str(store)]) == 0
    assert f"{MODEL}: 2 checkpoints, steps 10..30" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_lost_manifest_is_refused_then_rebuilt_from_the_files_and_nothing_is_deleted(tmp_path, capsys, how):
    store = tmp_path / "store"
    for s in (10, 20):
        result(store, s)
    result(store, 30, keep_inputs=False)
    write_taus(store)
    before = S.read_table(store, "checkpoints").sort_by("step")
    heads = S.read_table(store, "head_scores").sort_by([("step", "ascending"), ("head_index", "ascending")])
    files = result_files(store)
    if how == "emptied":  # what a crash before a new series' first row leaves: not refused, repair rebuilds
        S.write_manifest(store, MODEL, S.SCHEMAS["checkpoints"].empty_table())
        assert S.stored_checkpoint_keys(store, MODEL) == set()
        assert cli_main(["status", "--store", str(store)]) == 0
        capsys.readouterr()
    else:
        S.manifest_path(store, MODEL).unlink()
    refused = f"{MODEL} has 3 head_scores files but no manifest .* is missing.*dormant store repair --store"
    for read in (
        ()
        if how == "emptied"
        else (
            lambda: SeriesView.open(store, MODEL),
            lambda: S.read_table(store, "head_scores"),
            lambda: S.stored_checkpoint_keys(store, MODEL),  # `dormant track`: refused before it scores anything
            lambda: result(store, 40),  # and no commit next to them
        )
    ):
        with pytest.raises(StoreError, match=refused):
            read()
    assert result_files(store) == files
    if how == "deleted":
        assert cli_main(["status", "--store", str(store)]) == 2
        assert one_error_line(capsys, "status", "is missing", "dormant store repair --store")

    assert cli_main(["store", "repair", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"rebuilt the manifest of {MODEL} (3 results)" in out and "0 unreferenced files deleted" in out
    assert result_files(store) == files
    assert S.read_table(store, "checkpoints").sort_by("step").equals(before)  # every column, kept flags too
    assert (
        S.read_table(store, "head_scores").sort_by([("step", "ascending"), ("head_index", "ascending")]).equals(heads)
    )
    assert cli_main(["status", "--store", str(store)]) == 0
    assert f"{MODEL}: 3 checkpoints, steps 10..30" in capsys.readouterr().out


def test_a_lost_manifest_that_cannot_be_rebuilt_is_refused_and_nothing_is_deleted(tmp_path, capsys):
    store = tmp_path / "store"
    keys = [result(store, s) for s in (10, 20)]
    write_taus(store)
    old = S.read_table(store, "head_scores", filters={"step": 10})  # read without its metadata
    S.write_table(store, "head_scores", old, file_key=keys[0])  # as written before files kept their manifest row
    S.manifest_path(store, MODEL).unlink()
    files = result_files(store)
    assert cli_main(["store", "repair", "--store", str(store)]) == 2
    one_error_line(capsys, "store", "cannot be rebuilt", f"{keys[0]}.parquet", "nothing was deleted", "dormant track")
    assert result_files(store) == files and not S.manifest_path(store, MODEL).exists()
    assert cli_main(["status", "--store", str(store)]) == 2
    one_error_line(capsys, "status", "dormant store repair --store")


def test_gc_drops_kept_input_scores_and_keeps_the_masks(tmp_path, capsys):
    store = tmp_path / "store"
    for s in (10, 20):
        result(store, s)
    result(store, 30, keep_inputs=False)
    before = S.read_table(store, "head_scores")
    assert S.read_table(store, "input_scores").num_rows == 12
    assert cli_main(["store", "gc", "--store", str(store)]) == 0
    assert "per-input scores dropped for 2 checkpoints (2 files" in capsys.readouterr().out
    assert S.read_table(store, "input_scores").num_rows == 0
    assert not list(folder(store, "input_scores").glob("*.parquet"))
    assert S.read_table(store, "head_scores").equals(before)
    assert not any(S.read_table(store, "checkpoints").column("input_scores_kept").to_pylist())


def test_gc_never_follows_a_symbolic_link_out_of_the_store(tmp_path, capsys):
    """A user's folder linked in as a series folder of input_scores, and a linked file: their Parquet files are
    not the store's; gc leaves them, says so, and drops only the store's own."""
    store = tmp_path / "store"
    result(store, 10)
    mine = tmp_path / "userproj"
    mine.mkdir()
    (mine / "keep.parquet").write_bytes(b"PAR1 a user's own file PAR1")
    (mine / "other.parquet").write_bytes(b"PAR1 another PAR1")
    (folder(store, "input_scores") / "linked.parquet").symlink_to(mine / "other.parquet")
    (store / "input_scores" / "series=user--linked").symlink_to(mine, target_is_directory=True)
    assert cli_main(["store", "gc", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert (mine / "keep.parquet").is_file() and (mine / "other.parquet").is_file()
    assert "linked.parquet is a symbolic link: left alone, not followed" in out
    assert not [p for p in folder(store, "input_scores").glob("*.parquet") if not p.is_symlink()]


def test_input_scores_are_float32_and_the_policy_is_explicit(tmp_path):
    assert S.SCHEMAS["input_scores"].field("score").type == "float"
    assert keep_input_scores(InputScoresPolicy.AUTO, INPUT_SCORES_AUTO_LIMIT)
    assert not keep_input_scores(InputScoresPolicy.AUTO, INPUT_SCORES_AUTO_LIMIT + 1)
    assert keep_input_scores(InputScoresPolicy.KEEP, 10**9) and not keep_input_scores(InputScoresPolicy.DROP, 1)
    assert 128 * 16 * 1024 > INPUT_SCORES_AUTO_LIMIT  # a 7B model's default run keeps none
    base = dict(source=MODEL, store=str(tmp_path))
    assert TrackRequest(**base).input_scores is InputScoresPolicy.AUTO
    assert TrackRequest(**base, input_scores="keep").input_scores is InputScoresPolicy.KEEP
    old = TrackRequest(**base, input_scores=False)  # a request saved before the policy existed
    assert old.input_scores is InputScoresPolicy.DROP
    assert TrackRequest.from_json(old.to_json()).input_scores is InputScoresPolicy.DROP
    with pytest.raises(Exception, match="--input-scores"):
        TrackRequest(**base, input_scores="sometimes")
    store = tmp_path / "s"
    result(store, 10)
    scores = S.read_table(store, "input_scores").column("score")
    assert scores.type == "float" and np.allclose(scores.to_numpy(), 0.1)
