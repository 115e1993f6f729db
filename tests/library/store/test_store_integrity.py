"""Damaged store files (truncated, bytes flipped) and derived tables lost: found by name, set aside, rebuilt.

A real series of three random tiny checkpoints tracked into a real store by the tracker's steps (no Prefect;
`run_steps`, as the flow calls them); `dormant status`, `dormant store repair` and a finished `dormant track`
run in process through the CLI. "Identical to a clean run": every row of every table, times, request ids
and file checksums aside.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dormant_tasks import store as S
from dormant_tasks.errors import StoreError
from dormant_tasks.names import series_slug
from dormant_tasks.tracking.derive import DERIVED_BY_KEY
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.tracker import TrackResult
from flows.cli import main as cli_main
from tests.builders.track import store_rows, track_steps


def request(series: Path, store: Path, **kw) -> TrackRequest:
    return TrackRequest(source=str(series), store=str(store), limit=8, report=False, input_scores="keep", **kw)


def run_steps(req: TrackRequest) -> TrackResult:
    return track_steps(req)


def checksum(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "_locks" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def clean(random_series, tmp_path_factory) -> Path:
    """A clean run's store (copied by each test that damages it)."""
    store = tmp_path_factory.mktemp("clean") / "store"
    result = run_steps(request(random_series, store))
    assert result.n_transitions and result.n_transitions > 0  # random heads cross tau: something to lose
    return store


@pytest.fixture
def store(clean, tmp_path) -> Path:
    return Path(shutil.copytree(clean, tmp_path / "store"))


def series_file(store: Path, table: str, model_id: str = "random-olmo2") -> Path:
    """The series' file of `table` (the manifest for checkpoints; of head_scores/input_scores, the second one)."""
    files = sorted((store / table / f"series={series_slug(model_id)}").glob("*.parquet"))
    return files[1] if table in S.RESULT_TABLES else files[0]


def truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size * 2 // 3)


def flip(path: Path) -> None:
    """One byte inside the data of the file's last column chunk (score_std in head_scores: issue 27 saw a
    flip there change 64 values silently)."""
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index("score_std") if "score_std" in names else meta.num_columns - 1)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    at = start + chunk.total_compressed_size - 3  # the chunk's last page, inside its data
    data = bytearray(path.read_bytes())
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("damage", [truncate, flip], ids=["truncated", "flipped"])
@pytest.mark.parametrize("table", ["head_scores", "checkpoints", "taus", "input_scores", "transitions"])
def test_a_damaged_file_is_named_by_status_and_check_and_repair_plus_rerun_restores_a_clean_run(
    table, damage, clean, store, random_series, capsys
):
    path = series_file(store, table)
    rel = str(path.relative_to(store))
    damage(path)

    # a flipped page of a result file is read by --verify alone (plain status reads every footer, not every page)
    verify = ["--verify"] if damage is flip and table in S.RESULT_TABLES else []
    assert cli_main(["status", "--store", str(store), *verify]) == 2
    err = err_lines(capsys)
    assert len(err) == 1 and rel in err[0] and "dormant store repair" in err[0], err
    assert cli_main(["store", "repair", "--store", str(store), "--check"]) == 2
    err = err_lines(capsys)
    assert any(rel in x for x in err) and err[-1].startswith("dormant store: error: 1 damaged file"), err

    # a read of it, anywhere, is one StoreError naming the file and the fix (the CLI prints it as one line)
    if table != "transitions":  # derived: recomputed by any track, never read damaged (below)
        with pytest.raises(StoreError, match=r"is damaged .*dormant store repair"):
            store_rows(store)

    before = checksum(store)
    assert cli_main(["store", "repair", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"moved damaged {rel} (" in out, out
    moved = list((store / "_quarantine").rglob(path.name))
    assert len(moved) == 1  # set aside, never deleted
    if table == "checkpoints":
        assert "rebuilt the manifest of random-olmo2 (3 results)" in out, out
    if table == "transitions":  # derived again by repair itself
        assert S.damage_of(path) is None
    assert checksum(store) != before
    if table in ("head_scores", "input_scores"):  # the rerun scores it again
        assert f"dropped random-olmo2@{path.name.rsplit('-', 1)[0]}: " in out, out
    assert cli_main(["store", "repair", "--store", str(store), "--check"]) == 0
    capsys.readouterr()

    run_steps(request(random_series, store))
    capsys.readouterr()  # the rerun's own output (a library call: its loading bars are the caller's business)
    assert store_rows(store) == store_rows(clean)
    assert cli_main(["status", "--store", str(store)]) == 0
    assert err_lines(capsys) == []


@pytest.mark.parametrize("how", ["deleted", "truncated", "stale"])
def test_lost_derived_tables_are_derived_again_by_a_finished_rerun(how, clean, store, random_series, capsys):
    """Issue 27: the rerun of a stored series answered "transitions 0 / 0" and never derived them again."""
    for table in ("transitions", "head_histories"):
        path = series_file(store, table)
        if how == "deleted":
            path.unlink()
        elif how == "truncated":
            truncate(path)
        else:  # derived by another code version: metadata kept, rows of another derivation
            t = pq.read_table(path)
            meta = dict(t.schema.metadata) | {DERIVED_BY_KEY.encode(): b"0.0.0-old"}
            pq.write_table(t.slice(0, 1).replace_schema_metadata(meta), path)
    args = ["track", "--model", str(random_series), "--store", str(store), "--limit", "8"]
    assert cli_main([*args, "--no-report"]) == 0  # nothing to score: answered without Prefect
    out = capsys.readouterr().out
    assert "0 checkpoints analysed, 3 already stored" in out, out
    assert store_rows(store) == store_rows(clean)


def test_retau_with_a_damaged_input_scores_file_changes_nothing(store, random_series, capsys):
    truncate(series_file(store, "input_scores"))
    before = checksum(store)
    args = ["track", "--model", str(random_series), "--store", str(store), "--limit", "8"]
    assert cli_main([*args, "--retau", "--tau", "ahon_ln=0.5", "--no-report"]) == 2
    err = err_lines(capsys)
    assert len(err) == 1 and "--retau: nothing was changed" in err[0] and "input_scores/" in err[0], err
    assert checksum(store) == before


def test_a_read_of_a_damaged_file_is_one_error_line_in_report_and_findings(store, tmp_path, capsys):
    truncate(series_file(store, "head_scores"))
    for command in (
        ["report", "--model", "random-olmo2", "--store", str(store), "--reports-dir", str(tmp_path / "reports")],
        ["findings", "--store", str(store)],
    ):
        assert cli_main(command) == 2, command
        err = err_lines(capsys)
        assert len(err) == 1 and "is damaged" in err[0] and "dormant store repair" in err[0], err


def test_the_lock_is_held_across_processes_and_no_wait_refuses(tmp_path, capsys):
    """One writer per series: a second holder in another process waits (a line at once) or, --no-wait, is
    refused; a store that was never written keeps no folder."""
    import subprocess
    import sys
    import time

    store = tmp_path / "store"
    code = (
        "import sys, time\n"
        "from dormant_tasks.store import hold_series\n"
        "with hold_series(sys.argv[1], 'some/series'):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(float(sys.argv[2]))\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(store), "3"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(StoreError, match=rf"another run is writing series some/series .*\(pid {holder.pid}\)"):
        with S.hold_series(store, "some/series", wait=False):
            pass
    with S.hold_series(store, "other/series", wait=False):  # other series are not blocked
        pass
    t0 = time.monotonic()
    with S.hold_series(store, "some/series"):
        waited = time.monotonic() - t0
        assert holder.wait(timeout=30) == 0
    assert waited > 1.0
    assert capsys.readouterr().err.startswith(f"waiting for another run on some/series (pid {holder.pid}): ")
    assert [p for p in store.rglob("*")] == []  # nothing was stored: no lock file left behind

    killed = subprocess.Popen([sys.executable, "-c", code, str(store), "600"], stdout=subprocess.PIPE, text=True)
    assert killed.stdout.readline().strip() == "held"
    killed.kill()  # SIGKILL: no handler runs; the kernel releases the lock with the process
    killed.wait(timeout=30)
    with S.hold_series(store, "some/series", wait=False):
        pass
