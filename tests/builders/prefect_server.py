"""A real `prefect server start` on a free loopback port, as a user runs one for `dormant serve` and `deploy`; and
the process-session helpers its tests use (a process of its own session, stopped with its children)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

PREFECT = Path(sys.executable).with_name("prefect")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_session(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """A process in a session of its own (its children too: the worker's flow-run process), output to `log`."""
    with open(log, "wb") as f:
        return subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def stop_session(process: subprocess.Popen) -> None:
    if process.poll() is None:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
            try:
                os.killpg(process.pid, sig)
                process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                return


def wait_healthy(url: str, server: subprocess.Popen, log: Path, within: float = 150) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"prefect server exited {server.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"prefect server did not answer in {within} s: {log.read_text(errors='replace')[-2000:]}")


@contextlib.contextmanager
def prefect_server(env: dict[str, str], log: Path) -> Iterator[str]:
    """`prefect server start` with `env` (its PREFECT_HOME), until the block ends: yields its PREFECT_API_URL."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    server = start_session([str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, log)
    try:
        wait_healthy(api, server, log)
        yield api
    finally:
        stop_session(server)
