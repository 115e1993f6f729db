"""`dormant store upgrade` on a real schema-1 store (tests/data/store_v1: written by dormant-heads 0.1.0's
`track --limit 8` of three random tiny checkpoints, plus a dynamic and a static `evaluate --limit 10`), and on
a schema-2 store written here in the version-2 layout of docs/DATA_CONTRACT.md."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dormant_tasks.engine.score_functions import SCORING_VERSION
from dormant_tasks.errors import StoreError
from dormant_tasks.store.io import SCHEMAS, read_table
from dormant_tasks.store.layout import SCHEMA_VERSION, store_version
from dormant_tasks.store.upgrade import V2_EVALUATION_NAMES
from dormant_tasks.tracking.series import SeriesView
from dormant_tasks.tracking.upgrade import upgrade_store
from flows.cli import main as cli_main

V1 = Path(__file__).resolve().parents[2] / "data" / "store_v1"
# The checkpoints layout of versions 2 and 3: the current one less the manifest columns.
V3_CHECKPOINTS = pa.schema([f for f in SCHEMAS["checkpoints"] if f.name not in ("file_key", "input_scores_kept")])
V3_HEADS = pa.schema([f for f in SCHEMAS["head_scores"] if not f.name.startswith("dormant_rate_")])
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
    assert SCHEMA_VERSION == 4
    assert store_version(v1_store) == SCHEMA_VERSION
    manifests = sorted(p.name for p in (v1_store / "checkpoints").rglob("*.parquet"))
    assert manifests == ["checkpoints.parquet"]  # the per-checkpoint files became the series' manifest
    for table in SCHEMAS:
        for p in (v1_store / table).rglob("*.parquet"):
            assert pq.read_schema(p).names == SCHEMAS[table].names, p  # exactly the current columns
    heads = read_table(v1_store, "head_scores")
    assert heads.num_rows == 3 * old_heads.num_rows
    assert heads.column("sliding_window").null_count == heads.num_rows  # no window known for an old result
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
    import dormant_tasks.store.upgrade as U

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
    """Every file is converted, the derived tables are being written again (by the tracking part, which runs the
    upgrade): the marker still says 1."""
    import dormant_tasks.tracking.upgrade as U

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
    (ckpts := root / "checkpoints" / "series=allenai--OLMo-2-0425-1B").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([checkpoint], schema=V3_CHECKPOINTS), ckpts / "stage1-step10.parquet")
    (heads := root / "head_scores" / "series=allenai--OLMo-2-0425-1B").mkdir(parents=True)
    head_rows = [
        {
            **{k: checkpoint[k] for k in ("model_id", "revision", "stage", "step", "tokens")},
            "score_fn": "ahon_ln",
            "layer": 0,
            "head_index": h,
            "score": 0.5,
            "score_std": 0.1,
            "tau": 0.3,
            "direction": "<",
            "dormant_rate": 0.0,
            "dormant": False,
            "calibration_id": "cal",
            "taus_id": "taus",
        }
        for h in range(2)
    ]
    pq.write_table(pa.Table.from_pylist(head_rows, schema=V3_HEADS), heads / "stage1-step10.parquet")
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
    # added after version 3 without a schema bump: nullable, null in every older row ("not recorded")
    recorded_later = {"rendering", "precision", "threshold_source", "chat_date", "warnings"}
    assert all(SCHEMAS["evaluations"].field(n).nullable for n in recorded_later)
    assert added == {*PROTOCOL_BEFORE_V3, "fewshot_split", "evaluated_at", *recorded_later}


def test_a_v2_store_is_refused_then_upgraded(v2_store, capsys):
    with pytest.raises(StoreError, match="schema_version 2.*dormant store upgrade --store"):
        read_table(v2_store, "evaluations")
    assert cli_main(["store", "upgrade", "--store", str(v2_store)]) == 0
    # 2 evaluation files, the checkpoint and its head_scores file converted, then the series' manifest written
    assert "schema version 2 -> 4, 5 files rewritten, transitions derived again for 1 series" in capsys.readouterr().out
    assert store_version(v2_store) == SCHEMA_VERSION
    [manifest] = read_table(v2_store, "checkpoints").to_pylist()
    assert manifest["file_key"] == "stage1-step10" and manifest["input_scores_kept"] is False
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
    import dormant_tasks.store.upgrade as U

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
    # the second evaluations file, then the manifest (the checkpoints file was converted before the interrupt)
    assert (result.from_version, result.files_rewritten, result.series_derived) == (2, 2, 1)
    times = {r["request_id"]: r["evaluated_at"] for r in read_table(v2_store, "evaluations").to_pylist()}
    assert times == {"req0shot": V2_WRITTEN[0], "req5shot": V2_WRITTEN[1]}  # not the time of the rewrite
    assert not [p for p in v2_store.rglob(".*") if p.is_file()]


def test_a_store_of_an_unknown_old_version_is_refused(v2_store):
    (v2_store / "_store.json").write_text(json.dumps({"schema_version": 0}))
    with pytest.raises(StoreError, match="upgrades versions 1 to 3 to 4 only"):
        upgrade_store(v2_store)


# ---------------------------------------------------------------------------------------------- version 3


V3_INPUTS = pa.schema([f.with_type(pa.float64()) if f.name == "score" else f for f in SCHEMAS["input_scores"]])


@pytest.fixture
def v3_store(tmp_path) -> Path:
    """A schema-3 store in that layout: one `checkpoints` file per checkpoint and run, float64 input scores, a
    re-analysed checkpoint (two files, the newer wins), and head_scores of a run that died before its row."""
    root = tmp_path / "store3"
    series = "series=test-org--v3"
    for table in ("checkpoints", "head_scores", "input_scores", "taus"):
        (root / table / series).mkdir(parents=True)

    def common(step):
        return {
            "model_id": "test-org/v3",
            "revision": f"stage1-step{step}-tokens{step}B",
            "stage": 1,
            "step": step,
            "tokens": step,
        }

    runs = [(10, "k10", 0, True), (20, "k20old", 1, False), (20, "k20new", 2, True)]
    for step, key, minute, inputs in runs:
        row = {
            **common(step),
            "commit": f"sha-{key}",
            "n_layers": 1,
            "n_heads": 2,
            "calibration_id": "cal",
            "n_inputs": 2,
            "dtype": "float32",
            "device": "cpu",
            "seconds": 1.0,
            "analyzed_at": datetime(2025, 1, 1, 0, minute, tzinfo=UTC),
            "code_version": "0.3.0",
            "taus_id": "taus",
            "scoring_version": SCORING_VERSION,
            "ingredient": None,
            "request_id": "r",
        }
        pq.write_table(
            pa.Table.from_pylist([row], schema=V3_CHECKPOINTS), root / "checkpoints" / series / f"{key}.parquet"
        )
        heads = [
            {
                **common(step),
                "score_fn": "ahon",
                "layer": 0,
                "head_index": h,
                "score": 0.1 * minute,
                "score_std": 0.0,
                "tau": 0.5,
                "direction": "<",
                "dormant_rate": float(h),
                "dormant": bool(h),
                "calibration_id": "cal",
                "taus_id": "taus",
            }
            for h in range(2)
        ]
        pq.write_table(
            pa.Table.from_pylist(heads, schema=SCHEMAS["head_scores"]), root / "head_scores" / series / f"{key}.parquet"
        )
        if inputs:
            rows = [
                {
                    **common(step),
                    "input_index": i,
                    "score_fn": "ahon",
                    "layer": 0,
                    "head_index": h,
                    "score": 0.123456789,
                    "calibration_id": "cal",
                }
                for i in range(2)
                for h in range(2)
            ]
            pq.write_table(
                pa.Table.from_pylist(rows, schema=V3_INPUTS), root / "input_scores" / series / f"{key}.parquet"
            )
    orphan = [
        {
            **common(30),
            "score_fn": "ahon",
            "layer": 0,
            "head_index": 0,
            "score": 0.0,
            "score_std": 0.0,
            "tau": 0.5,
            "direction": "<",
            "dormant_rate": 0.0,
            "dormant": False,
            "calibration_id": "cal",
            "taus_id": "taus",
        }
    ]
    pq.write_table(
        pa.Table.from_pylist(orphan, schema=SCHEMAS["head_scores"]), root / "head_scores" / series / "k30.parquet"
    )
    taus = [
        {
            "model_id": "test-org/v3",
            "revision": "stage1-step20-tokens20B",
            "stage": 1,
            "step": 20,
            "tokens": 20,
            "score_fn": "ahon",
            "tau": 0.5,
            "direction": "<",
            "source": "fixed",
            "quantile": None,
            "reference_revision": None,
            "calibration_id": "cal",
            "taus_id": "taus",
        }
    ]
    pq.write_table(pa.Table.from_pylist(taus, schema=SCHEMAS["taus"]), root / "taus" / series / "taus.parquet")
    (root / "_store.json").write_text(json.dumps({"schema_version": 3, "created_by": "dormant-heads 0.3.0"}))
    return root


def test_a_v3_store_becomes_one_manifest_per_series(v3_store, capsys):
    with pytest.raises(StoreError, match="schema_version 3.*dormant store upgrade"):
        read_table(v3_store, "checkpoints")
    assert cli_main(["store", "upgrade", "--store", str(v3_store)]) == 0
    assert "schema version 3 -> 4" in capsys.readouterr().out
    folder = v3_store / "checkpoints" / "series=test-org--v3"
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoints.parquet"]
    manifest = {r["file_key"]: r["input_scores_kept"] for r in read_table(v3_store, "checkpoints").to_pylist()}
    assert manifest == {"k10": True, "k20old": False, "k20new": True}
    view = SeriesView.open(v3_store, "test-org/v3")
    assert view.revisions == ["stage1-step10-tokens10B", "stage1-step20-tokens20B"]
    heads = view.head_scores(revisions=["stage1-step20-tokens20B"])
    assert heads.column("score").to_pylist() == [pytest.approx(0.2)] * 2  # the newer run's file
    inputs = read_table(v3_store, "input_scores")
    assert inputs.schema.field("score").type == pa.float32() and inputs.num_rows == 8
    assert inputs.column("score").to_pylist() == [pytest.approx(0.123456789, rel=1e-7)] * 8
    assert read_table(v3_store, "head_scores").num_rows == 4  # the orphan k30 is not read
    assert cli_main(["store", "repair", "--store", str(v3_store)]) == 0
    assert "1 unreferenced files deleted" in capsys.readouterr().out
    assert cli_main(["store", "upgrade", "--store", str(v3_store)]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_a_version_4_store_gets_q_values_and_undefined_jaccards(tmp_path, capsys):
    """A version-4 store written before q-values (transitions without `confident_q`, `confident` = raw p <
    0.05) and before the empty-mask change (Jaccard 1.0 for two empty masks): `dormant store upgrade` brings
    both up to date in place, keeps the files' metadata, and has nothing to do the second time."""
    from dormant_tasks.store.io import read_metadata, write_table
    from dormant_tasks.store.layout import series_files
    from dormant_tasks.tracking.transitions import FDR_KEY, stored_rule
    from tests.builders.stores import MODEL, store_of_two_sets

    root = store_of_two_sets(tmp_path, differ=False)
    files = series_files(root, "transitions", MODEL)
    current = {p: pq.read_table(p) for p in files}  # derived by this release: q over 2 layers x 16 heads x 2 pairs
    for path, t in current.items():
        old = t.drop_columns(["confident_q"])
        raw = pa.array([p is not None and p < 0.05 for p in t.column("confident_p").to_pylist()], pa.bool_())
        old = old.set_column(old.column_names.index("confident"), "confident", raw)
        write_table(root, "transitions", old, file_key=path.stem, model_id=MODEL, metadata={"dormant.pairs": "[1]"})
    empty = {
        **{"model_id": MODEL, "revision": "stage1-step0-tokens0", "stage": 1, "step": 0, "tokens": 0},
        **{"score_fn": "ahon_ln", "calibration_a": "cal", "calibration_b": "cal-b", "n_heads": 32},
        **{"n_dormant_a": 0, "n_dormant_b": 0, "n_both": 0, "jaccard": 1.0, "n_sets": 2},
        **{"n_dormant_all": 0, "n_dormant_any": 0},
    }
    other = empty | {"revision": "stage1-step10-tokens100", "step": 10, "n_dormant_a": 3, "n_dormant_b": 2}
    other |= {"n_both": 1, "jaccard": 0.25, "n_dormant_all": 1, "n_dormant_any": 4}
    agreement_meta = {"dormant.agreement": "{}"}
    write_table(
        root,
        "calibration_agreement",
        [empty, other],
        file_key="calibration_agreement",
        model_id=MODEL,
        metadata=agreement_meta,
    )

    assert cli_main(["store", "upgrade", "--store", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"schema version {SCHEMA_VERSION}, {len(files) + 1} derived files brought up to date" in out
    from dormant_tasks.tracking import open_views

    decided = {f"transitions-{v.taus_id}-{v.calibration_id}": v.transitions() for v in open_views(root, MODEL)}
    for path, t in current.items():
        now = decided[path.stem]  # derived again, the decision pending: its first read takes it
        assert now.column("confident_q").to_pylist() == t.column("confident_q").to_pylist()
        assert now.column("confident").to_pylist() == t.column("confident").to_pylist()
        meta = read_metadata(root, "transitions", MODEL, path.stem)
        assert stored_rule(meta[FDR_KEY]) == (0.05, "bh")
    # the series is derived again (its transitions came from an older rule): its agreement is recomputed too,
    # with two empty masks undefined
    for r in read_table(root, "calibration_agreement", MODEL).to_pylist():
        assert math.isnan(r["jaccard"]) == (r["n_dormant_a"] + r["n_dormant_b"] - r["n_both"] == 0)
    assert "dormant.agreement" in read_metadata(root, "calibration_agreement", MODEL, "calibration_agreement")
    assert cli_main(["store", "upgrade", "--store", str(root)]) == 0
    assert "nothing to do" in capsys.readouterr().out
