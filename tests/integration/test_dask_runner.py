"""Scale-out: the same track flow on a real local Dask cluster (2 worker processes) writes the same store."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dormant_tasks import tracking as tracker
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking import checkpoint_work
from dormant_tasks.tracking.request import TrackRequest
from flows.runners import task_runner
from flows.track import track

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _sorted(table, keys):
    return table.sort_by([(k, "ascending") for k in keys])


@pytest.mark.slow
def test_dask_cluster_store_equals_thread_runner_store(random_series, tmp_path):
    kw = dict(source=str(random_series), limit=6, score_fns=("ahon_ln", "lthon_ln", "awft", "ahon"), report=False)
    local_request = TrackRequest(store=str(tmp_path / "local"), **kw)
    dask_request = TrackRequest(store=str(tmp_path / "dask"), runner="dask", workers=2, **kw)
    local = track.with_options(task_runner=task_runner(local_request))(local_request)
    dask = track.with_options(task_runner=task_runner(dask_request))(dask_request)
    assert local.analysed == dask.analysed == 3
    keys = ["revision", "score_fn", "layer", "head_index"]
    a = _sorted(read_table(tmp_path / "local", "head_scores"), keys)
    b = _sorted(read_table(tmp_path / "dask", "head_scores"), keys)
    for col in ("revision", "score_fn", "layer", "head_index", "dormant", "taus_id", "calibration_id"):
        assert a.column(col).to_pylist() == b.column(col).to_pylist(), col
    for col in ("score", "score_std", "tau", "dormant_rate"):
        np.testing.assert_allclose(a.column(col).to_numpy(), b.column(col).to_numpy(), rtol=1e-12, equal_nan=True)
    ta = _sorted(read_table(tmp_path / "local", "transitions"), keys)
    tb = _sorted(read_table(tmp_path / "dask", "transitions"), keys)
    assert ta.select(keys + ["from_state", "to_state"]).equals(tb.select(keys + ["from_state", "to_state"]))


@pytest.mark.slow
def test_a_checkpoint_a_worker_cannot_load_is_recorded_and_the_flow_writes_the_rest(random_series, tmp_path):
    """Dask runner: a worker's CheckpointError comes back to the flow, which records the checkpoint as failed (the
    one writer) and stores the others; a rerun after the fix stores it."""
    series = Path(shutil.copytree(random_series, tmp_path / "random-olmo2"))
    bad = "stage1-step10-tokens20K"
    weights = series / bad / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 3)
    request = TrackRequest(
        source=str(series),
        store=str(tmp_path / "dask"),
        runner="dask",
        workers=2,
        limit=4,
        score_fns=("ahon_ln",),
        report=False,
    )
    out = track.with_options(task_runner=task_runner(request))(request)
    assert (out.analysed, [name for name, _ in out.failed]) == (2, [bad])
    assert "the file is cut short" in out.failed[0][1]
    assert [r["revision"] for r in tracker.failed_checkpoints(request.store, request.model_id)] == [bad]
    shutil.rmtree(series / bad)
    shutil.copytree(random_series / bad, series / bad)
    again = track.with_options(task_runner=task_runner(request))(request)
    assert (again.analysed, again.skipped, again.failed) == (1, 2, ())
    assert tracker.failed_checkpoints(request.store, request.model_id) == []


def test_both_runners_write_every_checkpoint_through_the_flows_one_function(random_series, tmp_path, monkeypatch):
    """One per-checkpoint path: on the thread runner and on a real Dask cluster, each checkpoint's task returns its
    rows (or its failure) without writing, and the run's `_write_checkpoint` writes or records it, in the flow's
    process, the checkpoint the taus' step scores included. The series has a truncated checkpoint, so that both
    kinds of outcome go through it."""
    import dormant_tasks.run

    series = Path(shutil.copytree(random_series, tmp_path / "random-olmo2"))
    bad = "stage1-step10-tokens20K"
    weights = series / bad / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 3)
    calls = []
    real = dormant_tasks.run._write_checkpoint

    def spy(log, request, revision, outcome):
        stored = read_table(request.store, "checkpoints").column("revision").to_pylist()
        kind = type(outcome).__name__ if isinstance(outcome, Exception) else type(outcome[0]).__name__
        calls.append((request.runner.value, revision.name, kind, revision.name in stored, os.getpid()))
        return real(log, request, revision, outcome)

    monkeypatch.setattr(dormant_tasks.run, "_write_checkpoint", spy)
    kw = dict(source=str(series), limit=4, score_fns=("ahon_ln",), report=False)
    for request in (
        TrackRequest(store=str(tmp_path / "local"), **kw),
        TrackRequest(store=str(tmp_path / "dask"), runner="dask", workers=2, **kw),
    ):
        out = track.with_options(task_runner=task_runner(request))(request)
        assert (out.analysed, [name for name, _ in out.failed]) == (2, [bad])
        assert [r["revision"] for r in tracker.failed_checkpoints(request.store, request.model_id)] == [bad]
    # (runner, checkpoint, outcome, stored before the flow wrote it, process): nothing written by a task. The first
    # checkpoint is the one the taus' step scores (fixed taus), before the checkpoints' loop: through the same writer.
    stored = read_table(str(tmp_path / "local"), "checkpoints").column("revision").to_pylist()
    (first,) = set(stored) - {"stage1-step25-tokens51K"}
    assert sorted(calls) == sorted(
        (runner, name, kind, False, os.getpid())
        for runner in ("dask", "local")
        for name, kind in (
            (first, "CheckpointRows"),
            (bad, "CheckpointError"),
            ("stage1-step25-tokens51K", "CheckpointRows"),
        )
    )


# ---------------------------------------------------------------------------- workers without the store


def _can_hide_folders() -> bool:
    """Linux mount namespaces (root): a worker process can get a private empty mount over the store's folder."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True)
    return probe.returncode == 0


def _dask_workers(address: str, n: int, cwd: Path, hide: Path | None = None) -> list[subprocess.Popen]:
    """`dask worker` processes in another working directory; with `hide`, that folder is an empty tmpfs for them."""
    worker = f"exec {shlex.quote(sys.executable)} -m distributed.cli.dask_worker {address} --nthreads 1 --no-dashboard"
    if hide is not None:
        worker = f"mount -t tmpfs none {shlex.quote(str(hide))} && {worker}"
    cmd = ["unshare", "-m", "sh", "-c", worker] if hide is not None else ["sh", "-c", worker]
    return [subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]


@pytest.mark.slow
def test_workers_that_cannot_see_the_store_still_fill_it(random_series, tmp_path, monkeypatch):
    """The store lies in a folder that the workers see as an empty tmpfs (their own mount namespace), and they
    run in another working directory: they return rows, the flow writes them. Real processes, real Dask. The
    flow's process loads no model at all: even the checkpoint that fixes the new series' taus scores on a worker."""
    if not _can_hide_folders():
        pytest.skip("needs Linux mount namespaces (root and `unshare -m`) to hide the store from the workers")
    from distributed import Client, LocalCluster

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (elsewhere := tmp_path / "elsewhere").mkdir()
    store = hidden / "store"
    kw = dict(source=str(random_series), limit=6, score_fns=("ahon_ln", "awft"), report=False)
    with LocalCluster(n_workers=0, processes=True, dashboard_address=None) as cluster:
        workers = _dask_workers(cluster.scheduler_address, 2, elsewhere, hide=hidden)
        try:
            with Client(cluster) as client:
                client.wait_for_workers(2, timeout=120)
                (hidden / "marker").write_text("the flow sees this folder")
                seen = client.run(lambda: (os.path.exists(str(hidden / "marker")), os.getcwd()))
                assert all(not exists and cwd == str(elsewhere) for exists, cwd in seen.values()), seen
                request = TrackRequest(store=str(store), runner="dask", address=cluster.scheduler_address, **kw)
                loads_here = []
                load = checkpoint_work.lazy_load_checkpoint
                monkeypatch.setattr(
                    checkpoint_work, "lazy_load_checkpoint", lambda *a, **k: loads_here.append(a[1]) or load(*a, **k)
                )
                out = track.with_options(task_runner=task_runner(request))(request)
                monkeypatch.setattr(checkpoint_work, "lazy_load_checkpoint", load)
                assert loads_here == [], f"the flow's process loaded {loads_here}"
        finally:
            for w in workers:
                w.terminate()
                w.wait(30)
    local = TrackRequest(store=str(tmp_path / "local"), **kw)
    reference = track.with_options(task_runner=task_runner(local))(local)
    assert out.analysed == reference.analysed == 3
    keys = ["revision", "score_fn", "layer", "head_index"]
    a = _sorted(read_table(store, "head_scores"), keys)
    b = _sorted(read_table(tmp_path / "local", "head_scores"), keys)
    assert a.select(keys + ["dormant"]).equals(b.select(keys + ["dormant"]))


@pytest.mark.slow
def test_a_worker_dying_mid_checkpoint_is_retried_and_the_checkpoint_stored_once(random_series, tmp_path):
    import cloudpickle
    from distributed import Client, LocalCluster, WorkerPlugin

    class KillFirstCompute(WorkerPlugin):
        """The first worker to start a compute-checkpoint task dies a second later (os._exit), mid-checkpoint,
        as a preempted node does. A marker file makes it happen once across all workers."""

        name = "kill-first-compute"

        def __init__(self, marker: str):
            self.marker = marker

        def transition(self, key, start, finish, **kwargs):
            if finish != "executing" or "compute_checkpoint" not in str(key):  # prefect-dask's key: the function name
                return
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(fd, str(key).encode())
            os.close(fd)
            threading.Timer(1.0, os._exit, (1,)).start()

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the plugin class travels to the workers
    marker = tmp_path / "killed"
    store = tmp_path / "store"
    kw = dict(source=str(random_series), limit=6, score_fns=("ahon_ln", "awft"), report=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            client.register_plugin(KillFirstCompute(str(marker)))
            request = TrackRequest(store=str(store), runner="dask", address=cluster.scheduler_address, **kw)
            out = track.with_options(task_runner=task_runner(request))(request)
    assert marker.is_file(), "no worker was killed: the test did not test anything"
    assert out.analysed == 3
    manifest = read_table(store, "checkpoints", dedupe=False)
    assert sorted(manifest.column("revision").to_pylist()) == sorted(set(manifest.column("revision").to_pylist()))
    assert manifest.num_rows == 3
    heads = read_table(store, "head_scores", dedupe=False)
    assert heads.num_rows == 3 * 2 * 2 * 4  # checkpoints x functions x layers x heads: each stored once


def test_a_scheduler_that_does_not_answer_is_one_line_and_exit_2(random_series, tmp_path):
    with socket.socket() as s:  # a free port: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "flows.cli", "track", "--model", str(random_series), "--store", str(tmp_path / "s")]
    cmd += ["--runner", "dask", "--address", f"tcp://127.0.0.1:{port}", "--limit", "4"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"--address tcp://127.0.0.1:{port}: no Dask scheduler answers" in lines[0], lines
    assert elapsed < 30, elapsed
    assert not (tmp_path / "s").exists()  # nothing written
