"""The Parquet store: schemas, atomic writes, reads, dedupe, locking, and reads without the project."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from dormant_tasks import store as S
from dormant_tasks.errors import StoreError
from dormant_tasks.names import model_id_of_slug, series_slug
from flows.cli import main as cli_main

MODEL = "allenai/OLMo-2-1124-7B"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def checkpoint_row(step: int, model_id: str = MODEL, **changes) -> dict:
    row = dict(
        model_id=model_id,
        revision=f"stage1-step{step}-tokens{step * 4}B",
        stage=1,
        step=step,
        tokens=step * 4_000_000,
        commit=f"sha{step}",
        n_layers=2,
        n_heads=3,
        calibration_id="cal",
        n_inputs=8,
        dtype="float32",
        device="cpu",
        seconds=1.5,
        analyzed_at=T0 + timedelta(seconds=step),
        code_version="0.1.0",
        taus_id="taus",
        scoring_version="1",
        ingredient=None,
    )
    row.update(changes)
    return row


def head_score_rows(step: int, model_id: str = MODEL, dormant=(), score_fn: str = "ahon_ln", **changes) -> list[dict]:
    """Rows of a 2 x 3 checkpoint; `dormant` lists the (layer, head) pairs that are dormant."""
    base = checkpoint_row(step, model_id)
    return [
        dict(
            model_id=model_id,
            revision=base["revision"],
            stage=1,
            step=step,
            tokens=base["tokens"],
            score_fn=score_fn,
            layer=layer,
            head_index=head,
            score=0.1 * (layer * 3 + head) + step * 1e-4,  # distinct checkpoints score differently
            score_std=0.01,
            tau=0.5,
            direction="<",
            dormant_rate=1.0 if (layer, head) in dormant else 0.0,
            dormant=(layer, head) in dormant,
            calibration_id="cal",
            taus_id="taus",
        )
        | changes
        for layer in range(2)
        for head in range(3)
    ]


def commit(store, step: int, file_key: str, model_id: str = MODEL, dormant=(), **row) -> None:
    """One stored result: its head_scores file, then its manifest row naming that file."""
    S.write_table(store, "head_scores", head_score_rows(step, model_id, dormant=dormant), file_key=file_key)
    S.write_table(store, "checkpoints", [checkpoint_row(step, model_id, **row)], file_key=file_key)


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


# ------------------------------------------------------------------------------------------ layout, round trips


def test_series_slug():
    assert series_slug("allenai/OLMo-2-1124-7B") == "allenai--OLMo-2-1124-7B"
    assert series_slug("tiny-olmo2_v1.2") == "tiny-olmo2_v1.2"
    assert model_id_of_slug(series_slug("a/b.c")) == "a/b.c"
    assert series_slug("_x") == "_x" and series_slug("CONSOLE") == "CONSOLE" and series_slug("a/b-") == "a--b-"
    for bad in ["", "a b", "../x", "a/../b", "/abs/path", "a--b", "a//b", "x/", "é"]:
        with pytest.raises(StoreError, match="cannot name a store series"):
            series_slug(bad)
    # a hidden file, an option, a Windows device name (with or without an extension, any case, in any part)
    for bad in [".", ".x", "-x", "org/-x", "CON", "con.txt", "org/NUL", "lpt1", "Com9.parquet"]:
        with pytest.raises(StoreError, match="no device name"):
            series_slug(bad)


def test_round_trip_layout_and_marker(tmp_path):
    store = tmp_path / "store"
    key = "stage1-step1000-tokens4000B--run1"
    path = S.write_table(store, "checkpoints", [checkpoint_row(1000)], file_key=key)
    assert path == store / "checkpoints" / "series=allenai--OLMo-2-1124-7B" / "checkpoints.parquet"  # the manifest
    marker = json.loads((store / "_store.json").read_text())
    assert marker["schema_version"] == S.SCHEMA_VERSION == 4 and marker["created_by"].startswith("dormant-heads ")

    S.write_table(store, "head_scores", pa.Table.from_pylist(head_score_rows(1000, dormant={(1, 2)})), file_key=key)
    back = S.read_table(store, "head_scores")
    assert back.schema == S.SCHEMAS["head_scores"]
    assert back.to_pylist() == S.conform(head_score_rows(1000, dormant={(1, 2)}), "head_scores").to_pylist()
    assert back.column("model_id")[0].as_py() == MODEL  # the real id, '/' intact
    ck = S.read_table(store, "checkpoints").to_pylist()
    assert ck == [
        checkpoint_row(1000)
        | {"request_id": None, "file_key": key, "input_scores_kept": False}
        | {f"{t}_{c}": None for t in ("head_scores", "input_scores") for c in ("sha256", "bytes")}
        | {
            "input_clusters": None,
            "scores_sha256": None,
            "rescored_from": None,
        }  # written by write_table, not commit_checkpoint
    ]  # python values survive: ints, floats, tz-aware timestamp, null ingredient
    assert ck[0]["analyzed_at"].utcoffset() == timedelta(0)


def test_result_files_are_zstd_with_split_floats_and_round_trip(tmp_path):
    """head_scores of 1,024 heads with all-distinct scores: zstd, BYTE_STREAM_SPLIT on the noisy float columns,
    dictionary on the rest, values back exactly (score float64; score_std/length_slope/boundary_gap float32),
    and the file well under the plain snappy/float64 writing of the same rows (benchmarks/store_scale.py
    measures the size per checkpoint)."""
    import io

    import numpy as np
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    n = 16 * 1024
    rows = pa.table(
        {
            **{c: [v] * n for c, v in head_score_rows(10)[0].items() if c not in ("score", "score_std", "layer")},
            "layer": np.repeat(np.arange(32, dtype=np.int32), n // 32),
            "score": rng.random(n),
            "score_std": rng.random(n),
            "dormant_rate": rng.integers(0, 129, n) / 128,
            "length_slope": rng.normal(size=n),
            "boundary_gap": rng.normal(size=n),
        }
    )
    path = S.write_table(tmp_path / "store", "head_scores", rows, file_key="k")
    meta = pq.ParquetFile(path).metadata.row_group(0)
    cols = {meta.column(i).path_in_schema: meta.column(i) for i in range(meta.num_columns)}
    for name in ("score", "score_std", "length_slope", "boundary_gap"):
        assert "BYTE_STREAM_SPLIT" in cols[name].encodings, name
    assert (
        "RLE_DICTIONARY" in cols["dormant_rate"].encodings and "BYTE_STREAM_SPLIT" not in cols["dormant_rate"].encodings
    )
    assert {c.compression for c in cols.values()} == {"ZSTD"}

    S.write_table(tmp_path / "store", "checkpoints", [checkpoint_row(10)], file_key="k")  # commit it
    back = S.read_table(tmp_path / "store", "head_scores")
    assert back.num_rows == n
    assert back.column("score").to_numpy().tobytes() == rows.column("score").to_numpy().tobytes()  # float64, exact
    for name in ("score_std", "length_slope", "boundary_gap"):
        assert back.schema.field(name).type == pa.float32()
        np.testing.assert_array_equal(back.column(name).to_numpy(), rows.column(name).to_numpy().astype(np.float32))

    plain = io.BytesIO()
    pq.write_table(S.conform(rows, "head_scores"), plain)  # pyarrow's defaults: snappy, dictionary everywhere
    wide = io.BytesIO()  # the same rows as schema version 3 kept them: float64 statistics, snappy
    pq.write_table(rows, wide)
    size = path.stat().st_size
    assert size < 0.8 * plain.tell() and size < 0.6 * wide.tell(), (size, plain.tell(), wide.tell())


def test_read_filters_models_and_empty_tables(tmp_path):
    store = tmp_path / "s"
    commit(store, 10, "a", dormant={(0, 0)})
    commit(store, 20, "b")
    commit(store, 10, "a", model_id="tiny")
    S.write_table(store, "head_scores", head_score_rows(30), file_key="uncommitted")  # no manifest row: unseen
    assert S.read_table(store, "head_scores").num_rows == 18
    assert set(S.read_table(store, "head_scores", model_id="tiny").column("model_id").to_pylist()) == {"tiny"}
    got = S.read_table(store, "head_scores", model_id=MODEL, filters={"step": 10, "dormant": True})
    assert [(r["layer"], r["head_index"]) for r in got.to_pylist()] == [(0, 0)]
    assert S.read_table(store, "head_scores", filters={"step": [10, 20]}).num_rows == 18
    assert S.read_table(store, "head_scores", filters=ds.field("layer") == 1).num_rows == 9
    assert S.list_models(store) == sorted([MODEL, "tiny"])
    empty = S.read_table(store, "evaluations")
    assert empty.num_rows == 0 and empty.schema == S.SCHEMAS["evaluations"]
    assert S.read_table(store, "head_scores", model_id="never-stored").num_rows == 0
    with pytest.raises(StoreError, match='did you mean "layer"'):
        S.read_table(store, "head_scores", filters={"layr": 1})
    with pytest.raises(StoreError, match='unknown table .*did you mean "head_scores"'):
        S.read_table(store, "head_score")


def test_same_file_key_replaces(tmp_path):
    S.write_table(tmp_path, "transitions", [], file_key="all", model_id=MODEL)
    commit(tmp_path, 10, "derived")
    commit(tmp_path, 10, "derived", dormant={(0, 1)})
    back = S.read_table(tmp_path, "head_scores")
    assert back.num_rows == 6 and sum(back.column("dormant").to_pylist()) == 1
    assert S.read_table(tmp_path, "transitions").num_rows == 0


def test_file_keys_are_made_safe(tmp_path):
    p = S.write_table(tmp_path, "head_scores", head_score_rows(10), file_key="_../we ird/key")
    assert p.parent == tmp_path / "head_scores" / "series=allenai--OLMo-2-1124-7B" and p.name == "we_ird_key.parquet"
    with pytest.raises(StoreError, match="file key"):
        S.write_table(tmp_path, "head_scores", head_score_rows(10), file_key="..")
    a = S.CheckpointKey("stage1-step10", "sha", "cal", "taus", "1")
    assert S.checkpoint_file_key(a) == S.checkpoint_file_key(S.CheckpointKey(*a))
    assert S.checkpoint_file_key(a) != S.checkpoint_file_key(a._replace(taus_id="taus2"))
    assert S.checkpoint_file_key(a).startswith("stage1-step10-")


# ------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{k: v for k, v in checkpoint_row(1).items() if k != "commit"}], "missing column 'commit'"),
        ([checkpoint_row(1) | {"step": "ten"}], "column 'step' has type string, expected int64"),
        ([checkpoint_row(1, n_heads=2.5)], "column 'n_heads' has type double, expected int32"),
        ([checkpoint_row(1, comit="x")], "no column 'comit' \\(did you mean \"commit\"\\?\\)"),
        ([checkpoint_row(1, analyzed_at=datetime(2025, 1, 1))], "analyzed_at.*timezone-aware"),
        ([checkpoint_row(1, calibration_id=None)], "'calibration_id' has 1 null"),
        ([checkpoint_row(1), checkpoint_row(2, model_id="other")], "one file holds one series"),
        ([checkpoint_row(1, n_inputs=2**40)], "'n_inputs' does not fit int32"),
        ([checkpoint_row(1), checkpoint_row(2, seconds="slow")], "'seconds' has values of mixed"),
        ([], "empty table needs model_id"),
    ],
)
def test_schema_errors_name_the_column(tmp_path, rows, message):
    with pytest.raises(StoreError, match=message):
        S.write_table(tmp_path / "s", "checkpoints", rows, file_key="k")
    assert not (tmp_path / "s" / "checkpoints").exists() or files_under(tmp_path / "s" / "checkpoints") == []


def test_nullable_columns_may_be_left_out(tmp_path):
    row = {k: v for k, v in checkpoint_row(1).items() if k != "ingredient"}
    S.write_table(tmp_path, "checkpoints", [row, checkpoint_row(2, ingredient=3)], file_key="k")
    assert S.read_table(tmp_path, "checkpoints").column("ingredient").to_pylist() == [None, 3]


# ------------------------------------------------------------------------------------------ store folder


def test_missing_store_and_schema_version_mismatch(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        S.read_table(tmp_path / "nope", "checkpoints")
    with pytest.raises(StoreError, match="not a dormant store"):
        S.store_folder(tmp_path)
    assert S.stored_checkpoint_keys(tmp_path / "nope", MODEL) == set()
    S.write_table(tmp_path / "s", "checkpoints", [checkpoint_row(1)], file_key="k")
    calls = (
        lambda: S.read_table(tmp_path / "s", "checkpoints"),
        lambda: S.write_table(tmp_path / "s", "checkpoints", [checkpoint_row(2)], file_key="k2"),
        lambda: S.stored_checkpoint_keys(tmp_path / "s", MODEL),
    )
    (tmp_path / "s" / "_store.json").write_text(json.dumps({"schema_version": 5}))
    for call in calls:
        with pytest.raises(StoreError, match="schema_version 5, newer than this dormant-heads reads .4.: upgrade"):
            call()
    (tmp_path / "s" / "_store.json").write_text(json.dumps({"schema_version": 1}))
    for call in calls:
        with pytest.raises(StoreError, match="schema_version 1.*run `dormant store upgrade --store"):
            call()


def test_check_store_accepts_a_new_folder_and_refuses_another_version(tmp_path):
    S.check_store(tmp_path / "new")  # created by the first write later
    S.check_store(tmp_path)  # an empty folder
    assert not (tmp_path / "_store.json").exists()
    S.store_folder(tmp_path, create=True)
    S.check_store(tmp_path)
    (tmp_path / "_store.json").write_text(json.dumps({"schema_version": 0}))
    with pytest.raises(StoreError, match="schema_version 0"):
        S.check_store(tmp_path)


# ------------------------------------------------------------------------------------------ atomicity


def test_failed_write_leaves_no_file_and_no_temp(tmp_path):
    """A real failure after the temp file was written: the destination name is taken by a folder."""
    commit(tmp_path, 10, "ok")
    series = tmp_path / "head_scores" / "series=allenai--OLMo-2-1124-7B"
    (series / "blocked.parquet").mkdir()
    with pytest.raises(OSError):
        S.write_table(tmp_path, "head_scores", head_score_rows(20), file_key="blocked")
    (series / "blocked.parquet").rmdir()
    assert files_under(series) == ["ok.parquet"]
    assert S.read_table(tmp_path, "head_scores").num_rows == 6


_BIG_WRITE = """
import sys, numpy as np, pyarrow as pa
from dormant_tasks.store.io import write_table
n = 4_000_000
t = pa.table({"model_id": pa.array(["m"] * n), "revision": pa.array(["r"] * n),
    "stage": np.ones(n, np.int32), "step": np.arange(n), "tokens": np.arange(n),
    "input_index": np.arange(n, dtype=np.int32), "score_fn": pa.array(["ahon"] * n),
    "layer": np.zeros(n, np.int32), "head_index": np.zeros(n, np.int32), "score": np.random.rand(n).astype("f4"),
    "calibration_id": pa.array(["c"] * n)})
print("ready", flush=True)
write_table(sys.argv[1], "input_scores", t, file_key="big")
print("done", flush=True)
"""


@pytest.mark.slow
def test_killed_writer_leaves_no_visible_file(tmp_path):
    """SIGKILL during a big write: no final file, readers ignore the hidden temp, the next write sweeps it."""
    S.store_folder(tmp_path, create=True)
    folder = tmp_path / "input_scores" / "series=m"
    proc = subprocess.Popen([sys.executable, "-c", _BIG_WRITE, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 60
    while not (folder.is_dir() and any(folder.glob(".*.tmp"))):
        assert time.monotonic() < deadline and proc.poll() is None, "the writer finished before it could be killed"
        time.sleep(0.001)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (folder / "big.parquet").exists()
    assert S.read_table(tmp_path, "input_scores").num_rows == 0  # the leftover temp is invisible
    assert ds.dataset(tmp_path / "input_scores", format="parquet", partitioning="hive").count_rows() == 0
    rows = [
        dict(
            model_id="m",
            revision="r",
            stage=1,
            step=1,
            tokens=1,
            input_index=0,
            score_fn="ahon",
            layer=0,
            head_index=0,
            score=1.0,
            calibration_id="c",
        )
    ]
    S.write_table(tmp_path, "input_scores", rows, file_key="small")
    assert files_under(folder) == ["small.parquet"]


# ------------------------------------------------------------------------------------------ dedupe, concurrency


def test_dedupe_keeps_the_newest_result(tmp_path):
    old, new = checkpoint_row(10), checkpoint_row(10, analyzed_at=T0 + timedelta(days=1), seconds=9.0)
    S.write_table(tmp_path, "head_scores", head_score_rows(10, dormant={(0, 0)}), file_key="r10--runB")
    S.write_table(tmp_path, "checkpoints", [new], file_key="r10--runB")
    S.write_table(tmp_path, "head_scores", head_score_rows(10), file_key="r10--runA")
    S.write_table(tmp_path, "checkpoints", [old], file_key="r10--runA")  # same key, older: the newer row stays
    S.write_table(tmp_path, "head_scores", head_score_rows(10, calibration_id="cal2"), file_key="r10--other-cal")
    S.write_table(tmp_path, "checkpoints", [checkpoint_row(10, calibration_id="cal2")], file_key="r10--other-cal")
    ck = S.read_table(tmp_path, "checkpoints")
    assert sorted((r["calibration_id"], r["seconds"], r["file_key"]) for r in ck.to_pylist()) == [
        ("cal", 9.0, "r10--runB"),
        ("cal2", 1.5, "r10--other-cal"),
    ]
    assert S.read_table(tmp_path, "checkpoints", dedupe=False).num_rows == 2  # the manifest keeps one row per key
    hs = S.read_table(tmp_path, "head_scores", filters={"calibration_id": "cal"})
    assert hs.num_rows == 6 and sum(hs.column("dormant").to_pylist()) == 1  # runB's file, the newer result
    assert S.read_table(tmp_path, "head_scores").num_rows == 12
    assert S.stored_checkpoint_keys(tmp_path, MODEL) == {
        S.CheckpointKey(old["revision"], "sha10", "cal", "taus", "1"),
        S.CheckpointKey(old["revision"], "sha10", "cal2", "taus", "1"),
    }


def test_reads_follow_the_manifest_newest_result_and_kept_input_scores(tmp_path):
    def inputs(step, value):
        return [
            dict(
                model_id=MODEL,
                revision=f"r{step}",
                stage=1,
                step=step,
                tokens=step,
                input_index=i,
                score_fn="ahon",
                layer=0,
                head_index=0,
                score=value,
                calibration_id="cal",
            )
            for i in range(3)
        ]

    for run, value, when, sha in (("runA", 0.0, T0, "a"), ("runB", 1.0, T0 - timedelta(1), "b")):
        S.write_table(tmp_path, "input_scores", inputs(1, value), file_key=f"r1--{run}")
        S.write_table(tmp_path, "head_scores", head_score_rows(1, revision="r1"), file_key=f"r1--{run}")
        row = checkpoint_row(1, revision="r1", analyzed_at=when, commit=sha)
        S.write_table(tmp_path, "checkpoints", [row], file_key=f"r1--{run}")
    assert S.read_table(tmp_path, "input_scores").column("score").to_pylist() == [0.0] * 3  # runA is newer
    assert S.read_table(tmp_path, "input_scores", dedupe=False).num_rows == 6
    assert S.read_table(tmp_path, "head_scores").num_rows == 6
    # A newer result without input scores: none read for it, the older kept ones stay readable.
    S.write_table(tmp_path, "head_scores", head_score_rows(1, revision="r1"), file_key="r1--runC")
    row = checkpoint_row(1, revision="r1", analyzed_at=T0 + timedelta(1), commit="c")
    S.write_table(tmp_path, "checkpoints", [row], file_key="r1--runC")
    manifest = {r["file_key"]: r["input_scores_kept"] for r in S.read_table(tmp_path, "checkpoints").to_pylist()}
    assert manifest == {"r1--runA": True, "r1--runB": True, "r1--runC": False}
    assert S.read_table(tmp_path, "input_scores").column("score").to_pylist() == [0.0] * 3
    assert S.read_table(tmp_path, "head_scores").num_rows == 6  # runC's


def test_a_file_the_manifest_names_but_the_disk_lacks_is_refused_with_the_fix(tmp_path):
    commit(tmp_path, 10, "a")
    commit(tmp_path, 20, "b")
    (tmp_path / "head_scores" / "series=allenai--OLMo-2-1124-7B" / "b.parquet").unlink()
    with pytest.raises(
        StoreError, match=r"head_scores file of .*step20.* \(b.parquet\) is missing.*dormant store repair"
    ):
        S.read_table(tmp_path, "head_scores")
    assert S.read_table(tmp_path, "head_scores", filters={"step": 10}).num_rows == 6  # pruned: b is not opened


def _track_like(store: str, run: str, steps: list[int], use_lock: bool, start) -> None:
    """What a `track` run does per checkpoint: skip stored results, write scores, then the checkpoint row."""
    start.wait()
    for step in steps:
        row = checkpoint_row(step, analyzed_at=datetime.now(UTC))
        key = S.CheckpointKey(*(row[c] for c in S.CheckpointKey._fields))
        file_key = f"{row['revision']}--{run}"
        if use_lock:
            with S.series_lock(store, MODEL):
                if key in S.stored_checkpoint_keys(store, MODEL):
                    continue
                S.write_table(store, "head_scores", head_score_rows(step), file_key=file_key)
                S.write_table(store, "checkpoints", [row], file_key=file_key)
        else:
            S.write_table(store, "head_scores", head_score_rows(step), file_key=file_key)
            S.write_table(store, "checkpoints", [row], file_key=file_key)


@pytest.mark.parametrize("use_lock", [True, False])
def test_two_processes_write_one_series(tmp_path, use_lock):
    """Two real processes track overlapping checkpoints of one series at the same time."""
    S.store_folder(tmp_path, create=True)
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    steps = list(range(10, 130, 10))
    procs = [
        ctx.Process(target=_track_like, args=(str(tmp_path), run, order, use_lock, start))
        for run, order in (("runA", steps), ("runB", steps[::-1]))
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    ck = S.read_table(tmp_path, "checkpoints")
    assert sorted(ck.column("step").to_pylist()) == steps  # one result per checkpoint
    hs = S.read_table(tmp_path, "head_scores")
    assert hs.num_rows == 6 * len(steps)
    assert len(set(zip(*(hs.column(c).to_pylist() for c in ("revision", "layer", "head_index"))))) == hs.num_rows
    raw = S.read_table(tmp_path, "checkpoints", dedupe=False).num_rows
    assert raw == len(steps) if use_lock else len(steps) <= raw <= 2 * len(steps)
    assert not [f for f in files_under(tmp_path) if f.endswith(".tmp")]


def _hold_lock(store: str, queue) -> None:
    with S.series_lock(store, MODEL):
        queue.put("in")
        time.sleep(1.0)
        queue.put("out")


def test_series_lock_excludes_another_process(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_hold_lock, args=(str(tmp_path), queue))
    p.start()
    assert queue.get(timeout=60) == "in"
    with S.series_lock(tmp_path, MODEL):
        assert queue.get(timeout=1) == "out"  # the other process had released the lock before we got it
    p.join(10)
    with S.series_lock(tmp_path, "another/model"):  # other series are not blocked
        pass


# ------------------------------------------------------------------------------------------ readers without the project


@pytest.fixture
def two_series_store(tmp_path):
    S.write_table(tmp_path, "head_scores", head_score_rows(10, dormant={(0, 0)}), file_key="a")
    S.write_table(tmp_path, "head_scores", head_score_rows(20), file_key="b")
    S.write_table(tmp_path, "head_scores", head_score_rows(10, model_id="tiny"), file_key="a")
    S.write_table(tmp_path, "checkpoints", [checkpoint_row(10)], file_key="a")
    return tmp_path


def test_readable_by_pyarrow_dataset_and_pandas(two_series_store):
    import pandas as pd

    t = ds.dataset(two_series_store / "head_scores", format="parquet", partitioning="hive").to_table()
    assert t.num_rows == 18
    assert set(zip(t.column("series").to_pylist(), t.column("model_id").to_pylist())) == {
        ("allenai--OLMo-2-1124-7B", MODEL),
        ("tiny", "tiny"),
    }
    df = pd.read_parquet(two_series_store / "head_scores")
    assert len(df) == 18 and int(df[df.model_id == MODEL].dormant.sum()) == 1
    ck = pd.read_parquet(two_series_store / "checkpoints")
    assert str(ck.analyzed_at.dt.tz) == "UTC" and ck.step.tolist() == [10]


def test_readable_by_duckdb_and_polars(two_series_store):
    import duckdb
    import polars as pl

    glob = str(two_series_store / "head_scores" / "*" / "*.parquet")
    [(n, dormant)] = duckdb.sql(
        f"select count(*), sum(dormant::int) from read_parquet('{glob}', hive_partitioning=true) "
        f"where series = 'allenai--OLMo-2-1124-7B'"
    ).fetchall()
    assert (n, dormant) == (12, 1)
    df = pl.scan_parquet(glob, hive_partitioning=True).filter(pl.col("model_id") == "tiny").collect()
    assert df.height == 6 and set(df["series"].to_list()) == {"tiny"}


# ------------------------------------------------------------------------------------------ `dormant status`


def taus_rows(model_id: str = MODEL, fns=("ahon_ln", "awft"), taus_id: str = "taus") -> list[dict]:
    base = checkpoint_row(20, model_id)
    return [
        dict(
            model_id=model_id,
            revision=base["revision"],
            stage=1,
            step=20,
            tokens=base["tokens"],
            score_fn=fn,
            tau=0.5,
            direction="<",
            source="fixed",
            quantile=None,
            reference_revision=None,
            calibration_id="cal",
            taus_id=taus_id,
        )
        for fn in fns
    ]


def test_status_cli(two_series_store, capsys):
    S.write_table(two_series_store, "checkpoints", [checkpoint_row(20)], file_key="b")
    S.write_table(two_series_store, "taus", taus_rows(), file_key="taus")
    r10, r20 = checkpoint_row(10)["revision"], checkpoint_row(20)["revision"]
    rows = [
        dict(
            model_id=MODEL,
            revision=r20,
            stage=1,
            step=20,
            tokens=1,
            score_fn=fn,
            tau=0.5,
            layer=0,
            head_index=0,
            from_revision=r10,
            to_revision=r20,
            from_step=10,
            to_step=20,
            from_tokens=0,
            to_tokens=1,
            from_state="dormant",
            to_state="active",
            confident=confident,
            blip=blip,
            calibration_id="cal",
            taus_id=tid,
        )
        for fn, tid, confident, blip in (
            ("ahon_ln", "taus", True, False),
            ("awft", "taus", None, True),  # null: the inputs unknown
            ("awft", "taus", True, False),
            ("awft", "older-taus", True, True),
        )
    ]
    S.write_table(two_series_store, "transitions", rows, file_key="transitions")
    assert cli_main(["status", "--store", str(two_series_store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the row of older taus is not current: 3 transitions, not 4; ahon_ln's counts, then the count over every function
    assert lines[0] == (
        f"{MODEL}: 2 checkpoints, steps 10..20, ahon_ln dormant 16.7% -> 0.0%, ahon_ln transitions 1 (1 confident at "
        "a rule not recorded (an older version's, or a run stopped before recording it; the files are whole): "
        "`dormant store repair` derives them again, 0 blips); 3 transitions over all 2 functions, per-input scores "
        "kept for 0/2"
    )
    assert lines[1] == "tiny: not tracked (0 evaluation rows)"


def test_status_cli_errors(tmp_path, capsys):
    assert cli_main(["status", "--store", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    S.store_folder(tmp_path / "empty", create=True)
    assert cli_main(["status", "--store", str(tmp_path / "empty")]) == 2
    assert "holds no model series" in capsys.readouterr().err
