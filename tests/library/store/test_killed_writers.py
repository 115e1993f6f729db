"""What killed writers leave (temp files, staging folders) is swept by name: a dead writer's of this host, older than
the sweeping run; never a live writer's, another host's, a newer one, or a name the tool does not make."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from dormant_tasks.atomic import sweep_dead_temps, temp_path
from dormant_tasks.outputs import Owner, staging_folder
from dormant_tasks.store.lock import sweep_killed_writers


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _as(path, pid: int | None = None, host: str | None = None):
    parts = path.name.rsplit(".", 4)  # [.name, host, pid, rand, kind]
    parts[1] = host or parts[1]
    parts[2] = str(pid) if pid is not None else parts[2]
    return path.with_name(".".join(parts))


def test_a_dead_writers_file_and_folder_go_a_live_or_foreign_or_newer_one_stays(tmp_path):
    dead, live = _dead_pid(), os.getppid()  # the parent of this test runs
    gone_file = _as(temp_path(tmp_path / "a.parquet"), dead)
    gone_folder = _as(temp_path(tmp_path / "report"), dead)
    gone_old = _as(temp_path(tmp_path / "report", "old"), dead)
    kept = [
        _as(temp_path(tmp_path / "b.parquet"), live),
        _as(temp_path(tmp_path / "c.parquet"), dead, host="another-host"),
        tmp_path / ".notes.tmp",
        tmp_path / ".report.tmp-1234abcd",  # an older release's staging folder: no writer in its name
    ]
    for p in (gone_file, *kept):
        p.write_bytes(b"x")
    for folder in (gone_folder, gone_old):
        folder.mkdir()
        (folder / "index.html").write_text("half")
    assert sorted(sweep_dead_temps(tmp_path, before=time.time() + 1)) == sorted([gone_file, gone_folder, gone_old])
    assert all(p.exists() for p in kept)

    newer = _as(temp_path(tmp_path / "d.parquet"), dead)
    newer.write_bytes(b"x")
    assert sweep_dead_temps(tmp_path, before=time.time() - 60) == [] and newer.exists()  # younger than the run


def test_the_store_sweep_reaches_every_folder_and_staging_sweeps_beside_its_folder(tmp_path):
    dead = _dead_pid()
    store = tmp_path / "store"
    deep = store / "head_scores" / "series=other"
    deep.mkdir(parents=True)
    left = _as(temp_path(deep / "x.parquet"), dead)
    left.write_bytes(b"x")
    os.utime(left, (time.time() - 3600,) * 2)  # older than this test process
    assert sweep_killed_writers(store) == [left]

    reports = tmp_path / "reports"
    reports.mkdir()
    stale = _as(temp_path(reports / "series"), dead)
    stale.mkdir()
    os.utime(stale, (time.time() - 3600,) * 2)
    mine = staging_folder(reports / "series", Owner.of("report", store, "series"))
    assert not stale.exists() and mine.is_dir() and str(os.getpid()) in mine.name
