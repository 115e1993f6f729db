"""`dormant store upgrade` on a real schema-1 store (tests/data/store_v1: written by dormant-heads 0.1.0's
`track --limit 8` of three random tiny checkpoints, plus a dynamic and a static `evaluate --limit 10`)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dormant_tasks.errors import StoreError
from dormant_tasks.series import SeriesView
from dormant_tasks.store import SCHEMA_VERSION, SCHEMAS, read_table, store_version
from dormant_tasks.store_upgrade import upgrade_store
from flows.cli import main as cli_main

V1 = Path(__file__).resolve().parents[1] / "data" / "store_v1"
MODEL = "random-olmo2"


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
    old_eval = [r for p in (v1_store / "evaluations").rglob("*.parquet") for r in pq.read_table(p).to_pylist()]
    assert cli_main(["store", "upgrade", "--store", str(v1_store)]) == 0
    assert "schema version 1 -> 2" in capsys.readouterr().out
    assert store_version(v1_store) == SCHEMA_VERSION
    for table in SCHEMAS:
        for p in (v1_store / table).rglob("*.parquet"):
            assert pq.read_schema(p).names == SCHEMAS[table].names, p  # exactly the v2 columns
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
