"""`dormant serve`: refused in one line without a Prefect server that answers (a temporary one would end with the
command, and the schedule with it); with one, Ctrl-C stops it with one line and exit 130, never Prefect's websocket
traceback. Real subprocesses: `prefect server start` and the CLI, interrupted as a terminal does (SIGINT to the
process group)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.builders.prefect_server import free_port, prefect_server
from tests.builders.processes import cli_env, run_cli

REPO = Path(__file__).resolve().parents[2]


def _serve_args(series: Path, tmp_path: Path) -> list[str]:
    return ["serve", "--model", str(series), "--store", str(tmp_path / "store"), "--limit", "4", "--scores", "ahon_ln"]


@pytest.mark.parametrize("url", [None, "refused"])
def test_serve_without_a_server_that_answers_is_one_line_naming_how_to_start_one(random_series, tmp_path, url):
    env = cli_env(PREFECT_HOME=str(tmp_path / "home"))
    if url:
        env["PREFECT_API_URL"] = f"http://127.0.0.1:{free_port()}/api"
    args = [*_serve_args(random_series, tmp_path), "--cron", "0 3 * * *"]
    r, seconds = run_cli(args, env, tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("dormant serve: error: "), r.stderr
    if url:
        assert "does not answer" in lines[0] and "`prefect server start`" in lines[0], lines
    else:
        assert "a schedule needs a Prefect server that keeps running" in lines[0], lines
        assert "`prefect server start`" in lines[0] and "prefect config set PREFECT_API_URL=" in lines[0], lines
    assert r.stdout == "" and seconds < 30 and not (tmp_path / "store").exists()


@pytest.mark.slow
def test_ctrl_c_stops_serve_with_one_line_and_exit_130(random_series, tmp_path):
    """Five serves, each interrupted once it polls (at a different moment after the banner): each says one line
    on stderr and exits 130; no traceback, no websocket `ConnectionClosed`."""
    env = cli_env(PREFECT_HOME=str(tmp_path / "home"))
    with prefect_server(env, tmp_path / "server.log") as api:
        env["PREFECT_API_URL"] = api
        for k in range(5):
            out, err = tmp_path / f"out{k}", tmp_path / f"err{k}"
            with open(out, "wb") as o, open(err, "wb") as e:
                serve = subprocess.Popen(
                    [sys.executable, "-m", "flows.cli", *_serve_args(random_series, tmp_path)]
                    + ["--cron", "0 3 * * *", "--name", f"serve-{k}"],
                    cwd=tmp_path,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=o,
                    stderr=e,
                    start_new_session=True,
                )
            try:
                deadline = time.monotonic() + 120
                while "being served and polling" not in " ".join(out.read_text(errors="replace").split()):
                    assert serve.poll() is None, err.read_text(errors="replace")[-3000:]
                    assert time.monotonic() < deadline, out.read_text(errors="replace")[-3000:]
                    time.sleep(0.2)
                time.sleep(0.5 * k)  # the runner polls and listens on its websocket by then
                os.killpg(serve.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
                code = serve.wait(60)
            finally:
                if serve.poll() is None:
                    os.killpg(serve.pid, signal.SIGKILL)
            stderr = err.read_text(errors="replace")
            assert "Traceback" not in stderr and "ConnectionClosed" not in stderr, stderr[-3000:]
            assert code == 130, stderr[-3000:]
            assert stderr.strip().splitlines() == [
                "dormant serve: stopped; the schedule is paused on the Prefect server until `dormant serve` runs again"
            ], stderr[-3000:]
