"""The drift tests of `flows/prefect_adapter.py`, against the installed Prefect: the internals it uses have the shape
it uses (a moved one fails in one line naming the version and the adapter), and the temporary server it starts
is in a process session of its own, writes to the file it was given, and is the instance Prefect's clients use,
while the rest of the process keeps the real `subprocess.Popen`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows import prefect_adapter

REPO = Path(__file__).resolve().parents[2]


def test_the_internals_have_the_shape_the_adapter_uses():
    prefect_adapter.check_shape()


def test_a_moved_internal_is_one_line_naming_the_version_and_the_adapter(monkeypatch):
    import prefect
    from prefect.server.api import server as server_module

    monkeypatch.delattr(server_module, "subprocess")
    with pytest.raises(prefect_adapter.PrefectDrift) as e:
        prefect_adapter.check_shape()
    assert str(e.value).startswith(f"prefect {prefect.__version__}: ")
    assert str(e.value).endswith("fix flows/prefect_adapter.py for this version")


_START = """
import os, subprocess, sys, tempfile, threading, time
from flows import prefect_adapter
from prefect.server.api import server as server_module
from prefect.server.api.server import SubprocessASGIServer

popen, seen = subprocess.Popen, set()
def watch():  # what another thread sees while the server starts
    while not done.is_set():
        seen.add(subprocess.Popen is popen)
        time.sleep(0.001)
done = threading.Event()
watcher = threading.Thread(target=watch)
watcher.start()
output = tempfile.TemporaryFile()
server = prefect_adapter.start_server(output)
done.set()
watcher.join()
pid = prefect_adapter.server_pid(server)
fd1 = os.stat(f"/proc/{pid}/fd/1")
print("session", os.getsid(pid) == pid != os.getsid(0))
print("output", (fd1.st_dev, fd1.st_ino) == (os.fstat(output.fileno()).st_dev, os.fstat(output.fileno()).st_ino))
print("clients", SubprocessASGIServer() is server and server.running)
print("popen", seen == {True} and subprocess.Popen is popen and server_module.subprocess is subprocess)
server.stop()
print("stopped", prefect_adapter.server_pid(server) is None and not os.path.exists(f"/proc/{pid}"))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_temporary_server_runs_in_its_own_session_with_its_output_in_a_file(tmp_path):
    """In a child process: a test session's Prefect harness owns this process's default server."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONPATH": str(REPO)}
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    r = subprocess.run(
        [sys.executable, "-c", _START], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines == {k: "True" for k in ("session", "output", "clients", "popen", "stopped")}, r.stdout
