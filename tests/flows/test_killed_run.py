"""A `dormant track` killed outright (SIGKILL: no handler, no atexit) leaves no process behind: its temporary
Prefect server (uvicorn, in a process session of its own) dies with it (issue 27, item 8)."""

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
