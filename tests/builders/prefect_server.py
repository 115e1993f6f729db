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


def start_test_server(folder: Path, environ: dict[str, str] | None = None) -> str:
    """The API server that `prefect_test_harness` starts (uvicorn on Prefect's app, its ephemeral services, no UI,
    a SQLite database in `folder`), but in a process session of its own that outlives the test process that
    started it: one server for every xdist worker of a pytest run (`tests/conftest.py`), stopped by
    `stop_test_server` when the run ends. Its pid is in `folder/pid`; returns its PREFECT_API_URL."""
    import prefect

    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **(os.environ if environ is None else environ),
        "PREFECT_HOME": str(folder / "home"),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{folder / 'prefect-test.db'}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
    }
    env.pop("PREFECT_API_URL", None)
    args = [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parent.parent)]
    args += ["--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--log-level", "error", "--lifespan", "on"]
    server = start_session(args, env, folder / "server.log")
    (folder / "pid").write_text(str(server.pid))
    wait_healthy(api, server, folder / "server.log", within=240)
    return api


def session_server(tmp_path_factory, environ: dict[str, str] | None = None) -> str:
    """The PREFECT_API_URL of the one test server of this pytest run (`start_test_server`, started by the first
    process of the run that asks: `tests.builders.shared.built_once`)."""
    from tests.builders.shared import built_once

    start = lambda folder: start_test_server(folder, environ)  # noqa: E731
    return built_once(tmp_path_factory, "prefect-server", start)  # type: ignore[return-value]


def stop_test_server(folder: Path) -> None:
    """Stop what `start_test_server` started in `folder` (nothing when it never started)."""
    pid_file = folder / "pid"
    if not pid_file.is_file():
        return
    pid = int(pid_file.read_text())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):  # reaped here when this process started it (`-n 0`)
                os.waitpid(pid, os.WNOHANG)
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            continue
        break
    pid_file.unlink()
