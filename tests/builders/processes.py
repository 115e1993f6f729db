"""A real `dormant` subprocess whose process tree is watched: every descendant it starts is recorded while it runs,
so that a test can assert that none outlives it (a Dask worker, a temporary Prefect server, a resource tracker)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]


def cli_env(*hooks: Path, **extra: str) -> dict:
    """The environment of a user's run (its own temporary Prefect server, no Hub), this checkout first on the path;
    `hooks`: folders of a `sitecustomize.py` that every Python process of the run imports. Each run gets a Dask
    scratch folder of its own: in the shared /tmp/dask-scratch-space, one run's clean-up of another's files printed
    a second stderr line (a flaky one-line assertion)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    path = os.pathsep.join([*map(str, hooks), str(REPO)])
    scratch = tempfile.mkdtemp(prefix="dormant-dask-scratch-")
    return {
        **env,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": path,
        "DASK_TEMPORARY_DIRECTORY": scratch,
        **extra,
    }


def run_cli(args, env: dict, cwd, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    """A real `dormant` run (`python -m flows.cli ARGS`) with no stdin, its output captured: (result, seconds)."""
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "flows.cli", *map(str, args)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r, time.monotonic() - start


class WatchedRun:
    """`python -m flows.cli ARGS` in a session of its own, stderr to `stderr_path`, descendants recorded every 0.1 s."""

    def __init__(self, args, env: dict, cwd: Path, stderr_path: Path):
        self.stderr_path = stderr_path
        with open(stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "flows.cli", *map(str, args)],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        self.started = time.monotonic()
        self.descendants: dict[int, psutil.Process] = {}
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while self.proc.poll() is None:
            try:
                for p in psutil.Process(self.proc.pid).children(recursive=True):
                    self.descendants.setdefault(p.pid, p)
            except psutil.Error:
                pass
            time.sleep(0.1)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 240.0) -> None:
        """Until `text` is on stderr; fails when the run ends or the time is up first."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            assert self.proc.poll() is None, f"the run ended before {text!r}: {self.stderr()[-3000:]}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout:g} s: {self.stderr()[-3000:]}"
            time.sleep(0.1)

    def workers(self) -> list[psutil.Process]:
        """The run's Dask worker processes (a local cluster's: multiprocessing children of the run)."""
        out = []
        for p in psutil.Process(self.proc.pid).children():
            try:
                if "--multiprocessing-fork" in p.cmdline():
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def wait(self, timeout: float = 600.0) -> int:
        code = self.proc.wait(timeout=timeout)
        self._watcher.join(5)
        return code

    def survivors(self, timeout: float = 10.0) -> list[tuple[int, str]]:
        """The recorded descendants still running `timeout` s after the run ended (zombies count as gone)."""
        _, alive = psutil.wait_procs(list(self.descendants.values()), timeout=timeout)
        out = []
        for p in alive:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    out.append((p.pid, " ".join(p.cmdline())[:200]))
            except psutil.Error:
                pass
        return out

    def kill_all(self) -> None:
        """What a failing test left running: never outlives it."""
        for p in [self.proc, *self.descendants.values()]:
            try:
                p.kill()
            except (psutil.Error, ProcessLookupError):
                pass
