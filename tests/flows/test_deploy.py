"""`dormant deploy`: the track flow as a work-pool deployment, run by a real `prefect worker` from a real
`prefect server`; and its refusals (no server named, a server that does not answer, a bad schedule), each one
line, exit 2, within 10 s, before anything is registered. Real subprocesses throughout: the CLI, the server, the
worker and `prefect deployment run`."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from dormant_tasks.store.io import read_table
from tests.builders.prefect_server import PREFECT, free_port, start_session, stop_session, wait_healthy
from tests.builders.processes import run_cli
from tests.builders.progress import is_progress

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, api_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(REPO),  # this checkout's flows, in the CLI and in the worker's flow-run process alike
    )
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


def _dormant(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300
) -> tuple[int, list[str], str, float]:
    """(exit code, stderr lines without progress lines, stdout, seconds) of a real `dormant` run."""
    r, seconds = run_cli(args, env, cwd, timeout)
    lines = [x for x in r.stderr.strip().splitlines() if x and not is_progress(x)]
    return r.returncode, lines, r.stdout, seconds


def _deploy_args(series: Path, tmp_path: Path, *more: str) -> list[str]:
    return ["deploy", "--model", str(series), "--store", str(tmp_path / "store"), "--pool", "dormant", *more]


def _one_error_line(code: int, lines: list[str], seconds: float, needle: str) -> None:
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("dormant deploy: error: "), lines
    assert needle in lines[0], lines
    assert seconds < 30, f"{seconds:.1f} s"  # a bound against a hang, not a timing: a loaded machine took 12 s


def test_without_a_prefect_server_named_deploy_says_how_to_start_one(random_series, tmp_path):
    """A deployment in Prefect's temporary server would end with the command: refused, naming the two steps."""
    code, lines, out, seconds = _dormant(_deploy_args(random_series, tmp_path), _env(tmp_path, None), tmp_path)
    _one_error_line(code, lines, seconds, "`prefect server start`")
    assert "export PREFECT_API_URL=" in lines[0] and out == ""
    assert not (tmp_path / "store").exists()


def test_a_server_that_refuses_or_never_answers_is_one_line_within_10_s(random_series, tmp_path):
    refused = f"http://127.0.0.1:{free_port()}/api"
    code, lines, _, seconds = _dormant(_deploy_args(random_series, tmp_path), _env(tmp_path, refused), tmp_path)
    _one_error_line(code, lines, seconds, f"the Prefect server at PREFECT_API_URL {refused} does not answer")

    silent = socket.socket()  # accepts connections (the kernel's backlog) and never answers one
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/api"
        code, lines, _, seconds = _dormant(_deploy_args(random_series, tmp_path), _env(tmp_path, url), tmp_path)
    finally:
        silent.close()
    _one_error_line(code, lines, seconds, "does not answer (no answer in 5 s)")
    assert not (tmp_path / "store").exists()


def test_a_bad_schedule_is_refused_before_the_server_is_asked(random_series, tmp_path):
    code, lines, _, seconds = _dormant(
        _deploy_args(random_series, tmp_path, "--cron", "every day"), _env(tmp_path, None), tmp_path
    )
    _one_error_line(code, lines, seconds, "--cron 'every day' is not a cron expression")


@pytest.mark.slow
def test_a_worker_of_the_pool_runs_the_deployed_request_into_the_store(random_series, tmp_path):
    """deploy (the pool created as a process pool) -> `prefect deployment run` -> `prefect worker start --pool
    dormant`, kept until that flow run is over -> every checkpoint of the series is in the store, written by the
    worker's flow run.
    Deploying again with --cron updates the same deployment; --image on a process pool is refused."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = _env(tmp_path, api)
    processes: list[subprocess.Popen] = []
    try:
        server_log = tmp_path / "server.log"
        processes.append(
            start_session(
                [str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, server_log
            )
        )
        wait_healthy(api, processes[0], server_log)

        args = _deploy_args(random_series, tmp_path, "--limit", "4", "--scores", "ahon_ln", "--device", "cpu")
        code, lines, _, _ = _dormant([*args, "--no-report", "--image", "x/y:1"], env, tmp_path)
        assert code == 2 and len(lines) == 1 and "work pool dormant does not exist" in lines[0], lines
        code, lines, out, _ = _dormant([*args, "--no-report"], env, tmp_path)
        assert code == 0 and lines == [], lines
        assert "track-deployment/track-random-olmo2" in out and "(created: a process pool)" in out, out
        assert not (tmp_path / "store").exists(), "deploy itself ran the flow"

        code, lines, _, _ = _dormant([*args, "--no-report", "--image", "x/y:1"], env, tmp_path)
        assert code == 2 and len(lines) == 1 and "--image x/y:1: work pool dormant is a process pool" in lines[0]

        run = subprocess.run(
            [str(PREFECT), "deployment", "run", "track-deployment/track-random-olmo2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        flow_run_id = _uuid_in(run.stdout)

        # A worker that keeps polling (every second) until the flow run is over: a `--run-once` worker polled once,
        # and beside other tests (-n 2) that poll could come before the run was due and exit 0 having run nothing.
        worker_log = tmp_path / "worker.log"
        worker_env = {**env, "PREFECT_WORKER_QUERY_SECONDS": "1"}
        worker = start_session(
            [str(PREFECT), "worker", "start", "--pool", "dormant", "--limit", "1"], worker_env, worker_log
        )
        processes.append(worker)
        state = _final_state(api, flow_run_id, worker, worker_log, within=240)
        log = _wait_for_text(worker_log, "3 checkpoints analysed now", within=30)
        assert state.is_completed(), f"{state}: {log[-3000:]}"
        assert "3 checkpoints analysed now" in log, log[-3000:]  # the track subflow, on the request's runner

        stored = read_table(tmp_path / "store", "checkpoints").column("revision").to_pylist()
        assert sorted(set(stored)) == sorted(p.name for p in Path(random_series).iterdir() if p.is_dir())

        code, _, out, _ = _dormant([*args, "--no-report", "--cron", "0 3 * * *"], env, tmp_path)
        assert code == 0 and "(created" not in out and 'on schedule "0 3 * * *"' in out, out
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name("track-deployment/track-random-olmo2")
        assert [s.schedule.cron for s in deployment.schedules] == ["0 3 * * *"]
        assert deployment.work_pool_name == "dormant" and deployment.entrypoint == "flows.deployments.track_deployment"
    finally:
        for process in reversed(processes):
            stop_session(process)


def _uuid_in(text: str) -> str:
    import re

    found = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text)
    assert found, f"no flow run id in: {text[-2000:]}"
    return found.group(0)


def _final_state(api: str, flow_run_id: str, worker: subprocess.Popen, log: Path, within: float):
    """The flow run's state once it is final (Completed, Failed, Crashed, Cancelled), asked of the server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    deadline = time.monotonic() + within
    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            state = client.read_flow_run(flow_run_id).state
            if state is not None and state.is_final():
                return state
            if worker.poll() is not None:
                pytest.fail(f"the worker exited {worker.returncode}: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(1)
    pytest.fail(f"the flow run was not over in {within} s ({state}): {log.read_text(errors='replace')[-3000:]}")


def _wait_for_text(log: Path, text: str, within: float) -> str:
    """The log once `text` is in it (the flow-run process's output reaches the worker's as it comes), or at the
    deadline."""
    deadline = time.monotonic() + within
    while text not in (content := log.read_text(errors="replace")) and time.monotonic() < deadline:
        time.sleep(0.5)
    return content
