"""One Prefect API per run: a real `dormant track --runner dask --workers 2` (its own temporary server, two worker
processes) has at most one Prefect API server process at any moment, and none once it has ended. Before, each
worker started a temporary server of its own (three at once)."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from tests.builders.processes import WatchedRun, cli_env
from tests.builders.track import stored_checkpoints

pytestmark = [pytest.mark.slow]


def _is_api_server(p: psutil.Process) -> bool:
    try:
        line = " ".join(p.cmdline())
    except psutil.Error:
        return False
    return "uvicorn" in line or ("prefect" in line and " server start" in line)


def test_a_dask_run_has_one_prefect_api_server_and_none_after_it(random_series, tmp_path):
    store = tmp_path / "store"
    args = ["track", "--model", random_series, "--store", store, "--scores", "ahon_ln", "--no-report"]
    run = WatchedRun([*args, "--runner", "dask", "--workers", "2"], cli_env(), tmp_path, tmp_path / "err")
    counts: list[int] = []
    servers: dict[int, psutil.Process] = {}

    def sample() -> None:  # every 0.2 s: the API servers among the run's processes (the workers' children too)
        while run.proc.poll() is None:
            try:
                found = [p for p in psutil.Process(run.proc.pid).children(recursive=True) if _is_api_server(p)]
            except psutil.Error:
                found = []
            counts.append(len(found))
            servers.update((p.pid, p) for p in found)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        code = run.wait(300)
        sampler.join(5)
        survivors = run.survivors()
    finally:
        run.kill_all()
    print(f"API servers seen: at most {max(counts, default=0)} at once over {len(counts)} samples")
    assert code == 0, run.stderr()[-3000:]
    assert stored_checkpoints(store) == 3
    assert len(counts) > 25, "too few samples to say anything"  # the run lasts well over 5 s
    assert max(counts) == 1 and len(servers) == 1, (max(counts), [p.pid for p in servers.values()])
    assert not [p for p in servers.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not survivors, survivors
