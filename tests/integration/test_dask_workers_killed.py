"""Workers of a local Dask cluster killed or stopped under a real `dormant track --runner dask` (its own temporary
Prefect server, real worker processes): what the run records, how fast it stops, and that no process it or its
workers started outlives it. Also a SIGTERM to every process of a run, its temporary server included."""

from __future__ import annotations

import time

import pytest

from dormant_tasks.store.io import read_table
from dormant_tasks.tracking import failed_checkpoints
from dormant_tasks.tracking.request import TrackRequest
from tests.builders.processes import WatchedRun, cli_env
from tests.builders.progress import is_progress

pytestmark = [pytest.mark.slow]

# Imported by every Python process of a run whose PYTHONPATH holds its folder: a Dask worker process (a
# multiprocessing child) that opens the config.json of checkpoint $DORMANT_TEST_KILL_ON notes its pid and dies by
# SIGKILL, as a worker that the OOM killer or a preempting scheduler takes does: every time it is tried.
_KILL_ON_LOAD = """
import os, signal, sys
_bad = os.environ.get("DORMANT_TEST_KILL_ON")
if _bad and "--multiprocessing-fork" in sys.argv:
    def _die_on_open(event, args):
        if event == "open" and isinstance(args[0], str) and f"/{_bad}/config.json" in args[0]:
            with open(os.environ["DORMANT_TEST_KILL_LOG"], "a") as log:
                log.write(f"{os.getpid()}\\n")
            os.kill(os.getpid(), signal.SIGKILL)
    sys.addaudithook(_die_on_open)
"""


def test_a_checkpoint_whose_worker_is_killed_is_run_once_more_then_recorded_and_no_process_survives(
    random_series, tmp_path, prefect_api_url
):
    """`dormant track --runner dask`: each worker that starts loading one checkpoint is SIGKILLed. Dask runs it once
    more on a new worker, then gives up; the flow records it as failed (one line in the store), stores the others,
    exits 3; no process of the run (its temporary Prefect server, the workers, none that a worker started)
    outlives it: a worker reports to the flow's Prefect API and starts no server of its own. The flow's API is the
    session's Prefect test server (a run's own temporary server, and its URL handed to the workers, are
    tests/integration/test_dask_one_api.py's)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_KILL_ON_LOAD)
    bad, kills, store = "stage1-step10-tokens20K", tmp_path / "kills", tmp_path / "store"
    env = cli_env(hook, DORMANT_TEST_KILL_ON=bad, DORMANT_TEST_KILL_LOG=str(kills), PREFECT_API_URL=prefect_api_url)
    args = ["track", "--model", random_series, "--store", store, "--limit", "20", "--scores", "ahon_ln"]
    run = WatchedRun([*args, "--no-report", "--runner", "dask", "--workers", "2"], env, tmp_path, tmp_path / "err")
    try:
        code = run.wait()
        survivors = run.survivors()
    finally:
        run.kill_all()
    err = run.stderr()
    assert code == 3, err[-3000:]
    assert len(kills.read_text().split()) == 2, "tried once, then once more"
    (failed,) = failed_checkpoints(store, TrackRequest(source=str(random_series), store=str(store)).model_id)
    assert failed["revision"] == bad and "Dask worker computing it died 2 times" in failed["reason"], failed
    assert sorted(read_table(store, "checkpoints").column("revision").to_pylist()) == [
        "stage1-step0-tokens0K",
        "stage1-step25-tokens51K",
    ]
    assert "Traceback" not in err and "Restarting worker" not in err, err[-3000:]
    assert not survivors, survivors
    assert not any("uvicorn" in " ".join(p.cmdline()) for p in _worker_children(run)), "a worker started a server"


def _worker_children(run) -> list:
    """Children of the run's workers recorded while it ran (a worker's own temporary Prefect server would be one)."""
    worker_pids = {pid for pid, p in run.descendants.items() if _ppid(p) == run.proc.pid and _is_worker(p)}
    return [p for p in run.descendants.values() if _ppid(p) in worker_pids]


def _ppid(p) -> int | None:
    try:
        return p.ppid()
    except Exception:  # noqa: BLE001 - gone: its parent is no longer known
        return None


def _is_worker(p) -> bool:
    try:
        return "--multiprocessing-fork" in p.cmdline()
    except Exception:  # noqa: BLE001
        return False


def test_sigterm_to_a_worker_stops_the_run_like_ctrl_c_within_seconds_leaving_no_process(
    random_series, tmp_path, prefect_api_url
):
    """A SIGTERM sent to one worker of the local cluster (`kill`, a service manager stopping every process) is passed
    on to the flow: the run stops within a few seconds with the interrupt's one line and exit 130, and no process
    it started is left. Before, the worker was restarted and the run went on (or, its server orphaned, hung). Its
    flow on the session's Prefect test server; the next test stops a run's own temporary server."""
    store = tmp_path / "store"
    args = ["track", "--model", random_series, "--store", store, "--limit", "400", "--no-report"]
    env = cli_env(PREFECT_API_URL=prefect_api_url)
    run = WatchedRun([*args, "--runner", "dask", "--workers", "2"], env, tmp_path, tmp_path / "err")
    try:
        run.wait_for("checkpoints to score (1 of 3 already done): 0/2")  # the taus' one stored, the others computing
        time.sleep(1.0)
        workers = run.workers()
        assert len(workers) == 2, workers
        t0 = time.monotonic()
        workers[0].terminate()
        code = run.wait(timeout=120)
        seconds = time.monotonic() - t0
        survivors = run.survivors()
    finally:
        run.kill_all()
    err = run.stderr()
    lines = [x for x in err.strip().splitlines() if not is_progress(x) and not x.startswith("warning: calibration")]
    assert code == 130, err[-3000:]
    assert seconds < 10, f"the run stopped {seconds:.1f} s after the SIGTERM"
    assert len(lines) == 1 and lines[0].startswith("dormant track: interrupted: "), err[-3000:]
    assert not survivors, survivors


def test_sigterm_to_every_process_of_a_run_stops_it_in_one_line_within_10_s(random_series, tmp_path):
    """As `pkill -TERM` or a control group's stop does: the run's temporary Prefect server gets the SIGTERM too.
    Before, Prefect's crash handling retried the dead server for 80 s; now the run notices the server stopped and
    ends in one line, exit 130, nothing left running; a rerun stores every checkpoint."""
    import os
    import signal

    store = tmp_path / "store"
    args = ["track", "--model", random_series, "--store", store, "--limit", "60", "--no-report"]
    run = WatchedRun(args, cli_env(), tmp_path, tmp_path / "err")
    try:
        run.wait_for("checkpoints to score")
        for pid in [run.proc.pid, *run.descendants]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        sent = time.monotonic()
        code = run.wait(60)
        seconds = time.monotonic() - sent
        survivors = run.survivors()
    finally:
        run.kill_all()
    lines = [x for x in run.stderr().splitlines() if x.strip() and not is_progress(x) and "tau" not in x]
    assert code == 130, run.stderr()[-3000:]
    assert seconds < 10, f"{seconds:.1f} s"
    assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in run.stderr(), lines
    assert not survivors, survivors
