"""`dormant store upgrade` on a real schema-1 store (tests/data/store_v1: written by dormant-heads 0.1.0's
`track --limit 8` of three random tiny checkpoints, plus a dynamic and a static `evaluate --limit 10`), and on
a schema-2 store written here in the version-2 layout of docs/DATA_CONTRACT.md."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dormant_tasks.errors import StoreError
from dormant_tasks.series import SeriesView
from dormant_tasks.store import SCHEMA_VERSION, SCHEMAS, read_table, store_version, write_table
from dormant_tasks.store_upgrade import V2_EVALUATION_NAMES, upgrade_store
from flows.cli import main as cli_main

V1 = Path(__file__).resolve().parents[1] / "data" / "store_v1"
MODEL = "random-olmo2"


# What versions 1 and 2 evaluated under, as version 3 records it (docs/DATA_CONTRACT.md, "Changes from schema
# version 2"); `fewshot_split` is null in 0-shot rows, as version 3 writes it.
PROTOCOL_BEFORE_V3 = {
    "metric": "acc,none",
    "chat_template": False,
    "bos": "tokenizer",
    "data_source": "bundled",
    "lm_eval_version": None,
    "chance": 0.5,  # WinoGrande, two options
}


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)


def _checksum(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def v1_store(tmp_path) -> Path:
    return Path(shutil.copytree(V1, tmp_path / "store"))


def test_an_old_store_is_refused_with_the_fix_and_left_unchanged(v1_store, capsys):
    before = _checksum(v1_store)
    with pytest.raises(StoreError, match="dormant store upgrade --store"):
        read_table(v1_store, "checkpoints")
    assert cli_main(["status", "--store", str(v1_store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run `dormant store upgrade --store" in err[0]
    assert _checksum(v1_store) == before


def test_upgrade_rewrites_every_table_in_the_current_layout(v1_store, capsys):
    old_heads = pq.read_table(next((v1_store / "head_scores").rglob("*.parquet")))
    old_eval = [
        {**r, "written_at": _mtime(p)}
        for p in (v1_store / "evaluations").rglob("*.parquet")
        for r in pq.read_table(p).to_pylist()
    ]
    assert cli_main(["store", "upgrade", "--store", str(v1_store)]) == 0
    assert f"schema version 1 -> {SCHEMA_VERSION}" in capsys.readouterr().out
    assert SCHEMA_VERSION == 3
    assert store_version(v1_store) == SCHEMA_VERSION
    for table in SCHEMAS:
        for p in (v1_store / table).rglob("*.parquet"):
            assert pq.read_schema(p).names == SCHEMAS[table].names, p  # exactly the current columns
    heads = read_table(v1_store, "head_scores")
    assert heads.num_rows == 3 * old_heads.num_rows
    new_first = read_table(v1_store, "head_scores", filters={"revision": old_heads.column("revision")[0].as_py()})
    assert sorted(new_first.column("head_index").to_pylist()) == sorted(old_heads.column("head").to_pylist())
    inputs = read_table(v1_store, "input_scores")
    assert inputs.num_rows > 0 and "score" in inputs.column_names
    evals = read_table(v1_store, "evaluations").to_pylist()
    assert len(evals) == len(old_eval)
    by_key = {(r["mode"], r["score_fn"], r["quantile"]): r for r in evals}
    for old in old_eval:  # percentages became fractions
        new = by_key[(old["mode"], old["score_fn"], old["quantile"])]
        assert new["frac_zeroed"] == pytest.approx(old["pct_zeroed"] / 100)
        assert new["accuracy"] == pytest.approx(old["accuracy"] / 100)
        assert new["base_accuracy"] == pytest.approx(old["base_accuracy"] / 100)
        assert {k: new[k] for k in PROTOCOL_BEFORE_V3} == PROTOCOL_BEFORE_V3  # the v3 protocol columns
        assert new["fewshot_split"] is None and new["shots"] == old["shots"] == 0
        assert abs(new["evaluated_at"] - old["written_at"]).total_seconds() < 1e-3  # when its run wrote it
        assert new["request_id"] is None
    view = SeriesView.open(v1_store, MODEL)
    assert len(view.revisions) == 3 and view.n_stale == 0
    trans = view.transitions()
    assert set(trans.column("taus_id").to_pylist()) <= {view.taus_id}
    assert len(read_table(v1_store, "transitions").column("taus_id").to_pylist()) == trans.num_rows
    assert view.histories().num_rows == 16 * 2 * 4  # functions x layers x heads
    # and the upgraded store works with every reader: status and report
    assert cli_main(["status", "--store", str(v1_store)]) == 0
    assert capsys.readouterr().out.startswith(f"{MODEL}: 3 checkpoints, steps 0..25")
    assert cli_main(["store", "upgrade", "--store", str(v1_store)]) == 0  # a second run does nothing
    assert "nothing to do" in capsys.readouterr().out


def test_an_interrupted_upgrade_finishes_when_run_again(v1_store, monkeypatch):
    import dormant_tasks.store_upgrade as U

    calls = {"n": 0}
    real = U._convert_file

    def dies_on_the_fifth_file(path, table):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real(path, table)

    monkeypatch.setattr(U, "_convert_file", dies_on_the_fifth_file)
    with pytest.raises(KeyboardInterrupt):
        upgrade_store(v1_store)
    assert store_version(v1_store) == 1  # the marker is written last
    monkeypatch.setattr(U, "_convert_file", real)
    result = upgrade_store(v1_store)
    assert result.from_version == 1 and store_version(v1_store) == SCHEMA_VERSION
    assert SeriesView.open(v1_store, MODEL).revisions and read_table(v1_store, "evaluations").num_rows == 2 * 3 + 1
    assert not [p for p in v1_store.rglob(".*") if p.is_file()]  # no temp file left


def test_an_upgrade_interrupted_while_deriving_finishes_when_run_again(v1_store, monkeypatch):
    """Every file is converted, the derived tables are being written again: the marker still says 1."""
    import dormant_tasks.store_upgrade as U

    def dies(root, model_id):
        raise KeyboardInterrupt

    monkeypatch.setattr(U, "_derive_again", dies)
    with pytest.raises(KeyboardInterrupt):
        upgrade_store(v1_store)
    assert store_version(v1_store) == 1
    monkeypatch.undo()
    result = upgrade_store(v1_store)
    assert result.from_version == 1 and result.files_rewritten == 0 and result.series_derived == 1
    assert store_version(v1_store) == SCHEMA_VERSION
    for table in ("transitions", "head_histories"):
        files = list((v1_store / table).rglob("*.parquet"))
        assert files and all(pq.read_schema(p).names == SCHEMAS[table].names for p in files)


# ------------------------------------------------------------------------------ schema version 2 -> 3

# The evaluations table of schema version 2, as docs/DATA_CONTRACT.md described it (frozen here).
V2_EVALUATIONS = pa.schema(
    [
        pa.field("model_id", pa.string(), nullable=False),
        pa.field("revision", pa.string(), nullable=False),
        pa.field("stage", pa.int32(), nullable=False),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("tokens", pa.int64(), nullable=False),
        pa.field("task", pa.string(), nullable=False),
        pa.field("shots", pa.int32(), nullable=False),
        pa.field("mode", pa.string(), nullable=False),
        pa.field("score_fn", pa.string(), nullable=False),
        pa.field("quantile", pa.float64()),
        pa.field("tau", pa.float64()),
        pa.field("frac_zeroed", pa.float64(), nullable=False),
        pa.field("accuracy", pa.float64(), nullable=False),
        pa.field("n_items", pa.int32(), nullable=False),
        pa.field("base_accuracy", pa.float64(), nullable=False),
        pa.field("code_version", pa.string(), nullable=False),
        pa.field("request_id", pa.string()),
    ]
)
V2_WRITTEN = (datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC), datetime(2025, 4, 2, 8, 30, 15, 250000, tzinfo=UTC))
V2_MODEL = "allenai/OLMo-2-0425-1B"


def _v2_eval_rows(shots: int, request_id: str) -> list[dict]:
    common = {"model_id": V2_MODEL, "revision": "main", "stage": -1, "step": -1, "tokens": -1, "task": "winogrande"}
    rows = [
        {
            **common,
            "shots": shots,
            "mode": "dynamic",
            "score_fn": "ahon_ln",
            "quantile": q,
            "tau": 0.4 + q,
            "frac_zeroed": q,
            "accuracy": 0.7 - q / 2,
            "n_items": 1267,
            "base_accuracy": 0.7,
            "code_version": "0.2.0",
            "request_id": request_id,
        }
        for q in (0.0, 0.1, 0.2)
    ]
    return rows


@pytest.fixture
def v2_store(tmp_path) -> Path:
    """A schema-2 store: a checkpoint (its layout is the same in 2 and 3) and two evaluation runs, 0- and 5-shot."""
    root = tmp_path / "store2"
    checkpoint = {
        **{"model_id": V2_MODEL, "revision": "stage1-step10-tokens21B", "stage": 1, "step": 10, "tokens": 21 * 10**9},
        **{"commit": "sha10", "n_layers": 16, "n_heads": 16, "calibration_id": "cal", "n_inputs": 128},
        **{"dtype": "float32", "device": "cpu", "seconds": 2.0, "analyzed_at": V2_WRITTEN[0], "code_version": "0.2.0"},
        **{"taus_id": "taus", "scoring_version": "1", "ingredient": None, "request_id": "track1"},
    }
    write_table(root, "checkpoints", [checkpoint], file_key="stage1-step10")
    folder = root / "evaluations" / "series=allenai--OLMo-2-0425-1B"
    folder.mkdir(parents=True)
    for (shots, rid), written in zip(((0, "req0shot"), (5, "req5shot")), V2_WRITTEN):
        path = folder / f"main-dynamic-{rid}.parquet"
        pq.write_table(pa.Table.from_pylist(_v2_eval_rows(shots, rid), schema=V2_EVALUATIONS), path)
        os.utime(path, (written.timestamp(), written.timestamp()))
    (root / "_store.json").write_text(json.dumps({"schema_version": 2, "created_by": "dormant-heads 0.2.0"}))
    return root


def test_the_v2_layout_is_the_current_one_less_the_protocol_columns():
    """Every column that version 3 added gets a value in older rows (a column added later fails here first)."""
    assert list(V2_EVALUATION_NAMES) == V2_EVALUATIONS.names
    current = SCHEMAS["evaluations"].names
    assert [n for n in current if n in V2_EVALUATIONS.names] == V2_EVALUATIONS.names  # kept, in order
    added = {n for n in current if n not in V2_EVALUATIONS.names}
    assert added == {*PROTOCOL_BEFORE_V3, "fewshot_split", "evaluated_at"}


def test_a_v2_store_is_refused_then_upgraded_to_v3(v2_store, capsys):
    checkpoint_file = next((v2_store / "checkpoints").rglob("*.parquet"))
    checkpoint_bytes = checkpoint_file.read_bytes()
    with pytest.raises(StoreError, match="schema_version 2.*dormant store upgrade --store"):
        read_table(v2_store, "evaluations")
    assert cli_main(["store", "upgrade", "--store", str(v2_store)]) == 0
    assert "schema version 2 -> 3, 2 files rewritten" in capsys.readouterr().out
    assert store_version(v2_store) == SCHEMA_VERSION
    assert checkpoint_file.read_bytes() == checkpoint_bytes  # already in the current layout: untouched
    rows = read_table(v2_store, "evaluations").to_pylist()
    assert len(rows) == 6
    for shots, rid, written in ((0, "req0shot", V2_WRITTEN[0]), (5, "req5shot", V2_WRITTEN[1])):
        mine = sorted((r for r in rows if r["request_id"] == rid), key=lambda r: r["quantile"])
        before = _v2_eval_rows(shots, rid)
        assert [{k: r[k] for k in V2_EVALUATIONS.names} for r in mine] == before  # every v2 value kept
        for r in mine:
            assert {k: r[k] for k in PROTOCOL_BEFORE_V3} == PROTOCOL_BEFORE_V3
            assert r["fewshot_split"] == ("validation" if shots else None)  # v2 drew shots from WinoGrande dev
            assert r["evaluated_at"] == written  # the file's modification time, to the microsecond
    assert read_table(v2_store, "evaluation_items").num_rows == 0
    assert read_table(v2_store, "checkpoints").num_rows == 1
    assert cli_main(["store", "upgrade", "--store", str(v2_store)]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_an_interrupted_v2_upgrade_keeps_each_runs_time(v2_store, monkeypatch):
    import dormant_tasks.store_upgrade as U

    real = U._convert_file
    seen = []

    def dies_on_the_second_evaluations_file(path, table):
        if table == "evaluations":
            seen.append(path)
            if len(seen) == 2:
                raise KeyboardInterrupt
        return real(path, table)

    monkeypatch.setattr(U, "_convert_file", dies_on_the_second_evaluations_file)
    with pytest.raises(KeyboardInterrupt):
        upgrade_store(v2_store)
    assert store_version(v2_store) == 2  # the marker is written last
    assert pq.read_schema(seen[0]).names == SCHEMAS["evaluations"].names  # the first file is done
    monkeypatch.undo()
    result = upgrade_store(v2_store)
    assert (result.from_version, result.files_rewritten, result.series_derived) == (2, 1, 0)
    times = {r["request_id"]: r["evaluated_at"] for r in read_table(v2_store, "evaluations").to_pylist()}
    assert times == {"req0shot": V2_WRITTEN[0], "req5shot": V2_WRITTEN[1]}  # not the time of the rewrite
    assert not [p for p in v2_store.rglob(".*") if p.is_file()]


def test_a_store_of_an_unknown_old_version_is_refused(v2_store):
    (v2_store / "_store.json").write_text(json.dumps({"schema_version": 0}))
    with pytest.raises(StoreError, match="upgrades versions 1 and 2 to 3 only"):
        upgrade_store(v2_store)
