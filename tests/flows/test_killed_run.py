"""A `dormant track` killed outright (SIGKILL: no handler, no atexit) leaves no process behind: its temporary
Prefect server (uvicorn, in a process session of its own) dies with it (issue 27, item 8). What it was writing (a
store temp file, a report's staging folder) is removed by the next run, never what a live writer writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_sigkill_leaves_no_child_process(random_series, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # the run's own temporary server
    env |= {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    args = ["track", "--model", random_series, "--store", tmp_path / "store", "--limit", "400", "--no-report"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *map(str, args)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        run = psutil.Process(proc.pid)
        descendants: list[psutil.Process] = []
        deadline = time.monotonic() + 240
        while not any("uvicorn" in " ".join(_cmdline(p)) for p in descendants):
            assert proc.poll() is None, "the run ended before its server was up"
            assert time.monotonic() < deadline, "no temporary server within 240 s"
            time.sleep(0.2)
            descendants = run.children(recursive=True)
        time.sleep(1.0)  # the server up, the run going on
        descendants = run.children(recursive=True)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _, alive = psutil.wait_procs(descendants, timeout=30)
        assert not alive, [(p.pid, _cmdline(p)) for p in alive]
    finally:
        for p in [proc, *descendants]:  # what a failing run left: never outlives the test
            try:
                p.kill()
            except (psutil.Error, ProcessLookupError):
                pass


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


# Imported by every Python process of a run whose PYTHONPATH holds its folder: in the `dormant track` process, the
# thread that opens a path matching $DORMANT_TEST_PAUSE_ON for writing stops at its next audited call (the open is
# done: the file exists), touches $DORMANT_TEST_PAUSED and sleeps there, so that the test can SIGKILL it mid-write.
_PAUSE_ON_OPEN = """
import os, re, sys, threading, time
_pattern = os.environ.get("DORMANT_TEST_PAUSE_ON")
_paused = os.environ.get("DORMANT_TEST_PAUSED")
_opened = []
if _pattern and sys.argv[1:2] == ["track"]:
    def _pause(event, args):
        if _opened and _opened[0] == threading.get_ident():
            _opened.clear()  # (the marker's own open comes through here too)
            open(_paused, "a").close()
            time.sleep(120)
        if event == "open" and isinstance(args[0], str) and re.search(_pattern, args[0]) and "w" in str(args[1]):
            _opened.append(threading.get_ident())
    sys.addaudithook(_pause)
"""
# A temp file of the store (`atomic.temp_path`), and a file written into a report's staging folder.
_STORE_TEMP = r"/head_scores/series=[^/]+/\.[^/]+\.tmp$"
_REPORT_STAGING = r"/\.[^/]+\.tmp[^/]*/[^/]+$"


def test_what_a_killed_run_left_is_removed_by_the_next_run_a_live_writers_is_kept(
    random_series, tmp_path, prefect_api_url
):
    """SIGKILL a `dormant track` while it writes a head_scores file, then its rerun while it writes the report's
    staging folder: each next run removes what the killed one left (the store's temp file as it takes the series,
    the staging folder beside the report folder), and keeps the temp file and staging folder of a writer that still
    runs (a live pid on this host), and any name the tool does not make. Its runs' flows run on the session's
    Prefect test server: what a killed run leaves in the store is tested here, its temporary server above."""
    from dormant_tasks.atomic import temp_path
    from tests.builders.processes import WatchedRun, cli_env

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_PAUSE_ON_OPEN)
    store, reports, paused = tmp_path / "store", tmp_path / "reports", tmp_path / "paused"
    args = ["track", "--model", random_series, "--store", store, "--limit", "20", "--scores", "ahon_ln"]
    args += ["--reports-dir", reports / "random-olmo2"]
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a writer that still runs
    try:

        def killed_while_opening(pattern: str, name: str) -> None:
            paused.unlink(missing_ok=True)
            env = cli_env(hook, DORMANT_TEST_PAUSE_ON=pattern, DORMANT_TEST_PAUSED=str(paused))
            env["PREFECT_API_URL"] = prefect_api_url
            run = WatchedRun(args, env, tmp_path, tmp_path / f"{name}.err")
            try:
                deadline = time.monotonic() + 240
                while not paused.exists():
                    assert run.proc.poll() is None, run.stderr()[-3000:]
                    assert time.monotonic() < deadline, "the run never reached the write"
                    time.sleep(0.1)
                run.proc.kill()
                run.wait(30)
                assert not run.survivors()
            finally:
                run.kill_all()

        killed_while_opening(_STORE_TEMP, "first")
        (left,) = [p for p in store.rglob(".*.tmp") if p.is_file()]
        folder = left.parent
        live_temp = _named_for(temp_path(folder / "x.parquet"), live.pid)
        live_temp.write_bytes(b"a live writer's")
        other = folder / ".notes.tmp"  # no writer's name: not the tool's
        other.write_bytes(b"")

        killed_while_opening(_REPORT_STAGING, "second")  # it took the series: the first run's temp file is gone
        assert not left.exists() and live_temp.exists() and other.exists()
        (staging,) = [p for p in reports.iterdir() if p.name.startswith(".random-olmo2.")]
        assert staging.is_dir() and not (reports / "random-olmo2").exists()
        live_staging = _named_for(temp_path(reports / "random-olmo2"), live.pid)
        live_staging.mkdir()
        (live_staging / "index.html").write_text("a live writer's")

        done = subprocess.run(
            [sys.executable, "-m", "flows.cli", *map(str, args)],
            cwd=tmp_path,
            env=cli_env(PREFECT_API_URL=prefect_api_url),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert not staging.exists() and (reports / "random-olmo2" / "index.html").is_file()
        assert live_staging.is_dir() and live_temp.exists() and other.exists()
    finally:
        live.kill()
        live.wait()


def _named_for(path: Path, pid: int) -> Path:
    """`atomic.temp_path`'s name with another writer's pid: .NAME.HOST.PID.RAND.KIND."""
    parts = path.name.rsplit(".", 4)
    parts[2] = str(pid)
    return path.with_name(".".join(parts))
