"""The Dask runner's parts that need no Prefect server: one worker per GPU, the scheduler's address against a
temporary Prefect server, the GPU resource a CUDA task asks for. Real `distributed` clusters on CPU."""

from __future__ import annotations

import os
import sys

import pytest

from dormant_tasks import cluster
from dormant_tasks.tracking import TrackRequest
from tests.builders.processes import cli_env, run_cli


def _request(device: str, workers: int | None = None) -> TrackRequest:
    return TrackRequest(source="/nowhere", store="/nowhere/store", runner="dask", device=device, workers=workers)


def test_worker_i_gets_gpu_i_in_turn():
    assert [cluster.worker_gpu(i, ["0", "1"]) for i in range(5)] == ["0", "1", "0", "1", "0"]
    assert [cluster.worker_gpu(i, ["3", "GPU-aa", "5"]) for i in range(3)] == ["3", "GPU-aa", "5"]
    assert cluster.worker_gpu("0", ["2", "4"]) == "2"  # names may come as strings
    assert cluster.worker_gpu("tcp-worker", ["2", "4"]) == cluster.worker_gpu("tcp-worker", ["2", "4"])  # stable


def test_the_gpus_are_this_processs_own_list_or_the_visible_count(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert cluster.gpu_ids() == ["2", "3"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(cluster, "visible_gpus", lambda: 4)
    assert cluster.gpu_ids() == ["0", "1", "2", "3"]
    monkeypatch.setattr(cluster, "visible_gpus", lambda: 0)
    assert cluster.gpu_ids() == []


@pytest.mark.parametrize("dask_cuda", [True, False])
def test_a_cuda_run_gets_one_worker_per_gpu(monkeypatch, dask_cuda):
    """With 3 visible GPUs: 3 workers by default, each asking a GPU resource; dask-cuda's LocalCUDACluster where it
    is installed (`cuda_cluster`; its arguments only: it cannot start on a machine without a GPU, nor is dask-cuda
    installed here: benchmarks/gpu_cluster_check.py starts it on a GPU host), else a LocalCluster whose
    preload pins each worker (the test below starts that one)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(cluster, "visible_gpus", lambda: 3)
    monkeypatch.setattr(cluster, "_has_dask_cuda", lambda: dask_cuda)
    cls, kw = cluster.local_cluster_spec(_request("cuda"), "http://127.0.0.1:1/api")
    assert kw["n_workers"] == 3 and kw["resources"] == {"GPU": 1} and kw["threads_per_worker"] == 1
    assert kw["env"]["PREFECT_API_URL"] == "http://127.0.0.1:1/api"
    if dask_cuda:
        assert (
            cls == "dormant_tasks.cluster.cuda_cluster"
            and kw["CUDA_VISIBLE_DEVICES"] == "0,1,2"
            and "processes" not in kw
        )
        assert cluster.WORKER_GPUS_ENV not in kw["env"]
    else:
        assert cls == "distributed.LocalCluster" and kw["env"][cluster.WORKER_GPUS_ENV] == "0,1,2"
    # more workers than GPUs: a LocalCluster whose workers take the GPUs in turn, dask-cuda or not
    cls, kw = cluster.local_cluster_spec(_request("cuda", workers=5))
    assert cls == "distributed.LocalCluster" and kw["env"][cluster.WORKER_GPUS_ENV] == "0,1,2"
    assert "PREFECT_API_URL" not in kw["env"]  # no Prefect named: the GPU check script's cluster
    # cuda:N names one GPU: every worker uses it, unpinned; cpu: no GPU at all
    for device in ("cuda:1", "cpu"):
        cls, kw = cluster.local_cluster_spec(_request(device))
        assert cls == "distributed.LocalCluster" and kw["n_workers"] == cluster.DEFAULT_DASK_WORKERS
        assert cluster.WORKER_GPUS_ENV not in kw["env"]
    assert "resources" not in cluster.local_cluster_spec(_request("cpu"))[1]


def test_the_preload_pins_each_worker_of_a_real_local_cluster_to_its_gpu(monkeypatch):
    """Two real worker processes (no GPU needed: CUDA_VISIBLE_DEVICES is only an environment variable until CUDA
    initialises): each sees one GPU of the flow's list, a different one, set before any task runs."""
    from distributed import Client

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    monkeypatch.setattr(cluster, "_has_dask_cuda", lambda: False)
    with cluster.make_local_cluster(_request("cuda", workers=2)) as local, Client(local) as client:
        seen = client.run(lambda: (os.environ["CUDA_VISIBLE_DEVICES"], "torch" in sys.modules))
        resources = {w["name"]: w["resources"] for w in client.scheduler_info()["workers"].values()}
    assert sorted(v for v, _ in seen.values()) == ["5", "7"], seen
    assert not any(torch for _, torch in seen.values()), "a worker imported torch before its first task"
    assert resources == {0: {"GPU": 1}, 1: {"GPU": 1}}


def test_a_cuda_task_asks_the_scheduler_for_one_gpu_on_any_cluster():
    """`gpu_resources` (every Dask submission of the track flow, --address or local) reaches the scheduler as a
    `GPU: 1` restriction: a `dask worker --resources GPU=1` (or `dask cuda worker`) runs it, one at a time."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as local, Client(local) as client:
        with cluster.gpu_resources("cuda"):
            gpu = client.submit(sum, [1, 2], pure=False)
        with cluster.gpu_resources("cpu"):
            cpu = client.submit(sum, [3, 4], pure=False)

        assert cpu.result() == 7  # both submissions have reached the scheduler (one stream, in order)

        def restrictions(dask_scheduler, keys=(gpu.key, cpu.key)):
            return [(dask_scheduler.tasks[k].resource_restrictions, dask_scheduler.tasks[k].state) for k in keys]

        # the worker has no GPU: the CUDA task waits for one (`no-worker`) instead of running on it
        assert client.run_on_scheduler(restrictions) == [({"GPU": 1}, "no-worker"), (None, "memory")]


@pytest.mark.parametrize(
    "address, loopback",
    [
        ("tcp://127.0.0.1:8786", True),
        ("tcp://localhost:8786", True),
        ("127.0.0.2:8786", True),
        ("tcp://[::1]:8786", True),
        ("inproc://10.0.0.1/1/2", True),
        ("tcp://10.1.2.3:8786", False),
        ("tcp://192.0.2.7:8786", False),
    ],
)
def test_loopback_addresses(address, loopback):
    assert cluster.is_loopback(address) is loopback


def test_a_scheduler_away_from_loopback_with_a_temporary_server_is_refused_in_one_line(random_series, tmp_path):
    """Its workers could not reach the temporary server (127.0.0.1 of this host): refused before anything starts,
    naming the fix. With PREFECT_API_URL set the same address goes on to the scheduler check."""
    address = "tcp://192.0.2.7:8786"  # TEST-NET-1: nothing answers there
    args = ["track", "--model", random_series, "--store", tmp_path / "s", "--runner", "dask", "--address", address]
    r, seconds = run_cli(args, cli_env(), tmp_path, timeout=120)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(lines) == 1 and f"--address {address}: workers away from this host cannot reach" in lines[0], lines
    assert "PREFECT_API_URL" in lines[0] and "prefect server start" in lines[0], lines
    assert seconds < 30 and not (tmp_path / "s").exists()

    named = cli_env(PREFECT_API_URL="http://127.0.0.1:9/api")
    r, _ = run_cli(args, named, tmp_path, timeout=120)
    assert r.returncode == 2 and "no Dask scheduler answers" in r.stderr, r.stderr[-2000:]


def test_the_checkpoint_computation_of_every_runner_needs_no_store(random_series, tmp_path):
    """The one function a checkpoint task runs, on the thread runner (in the flow's process) and on a Dask worker
    alike (`tracking.compute_checkpoint`), with the store moved away while it runs: it returns the rows and
    neither reads nor creates anything at the store's path; the flow's writer stores them afterwards. (The thread
    runner's tasks share the flow's process, so no permission can keep them off the store; this is its check. The
    Dask one, workers of another user who cannot see the store: tests/integration/test_dask_other_user.py.)"""
    from dormant_tasks import tracking
    from dormant_tasks.store.io import read_table

    store = tmp_path / "store"
    request = TrackRequest(source=str(random_series), store=str(store), score_fns=("ahon_ln",))
    state = tracking.series_state(request)
    series = tracking.resolve_series_taus(request, state)  # the taus' checkpoint, computed and stored by the writer
    (revision, *_) = tracking.pending_revisions(request, state, series)
    away = store.rename(tmp_path / "away")
    rows = tracking.compute_checkpoint(request, revision, series)
    assert not store.exists(), "computing a checkpoint touched the store"
    away.rename(store)
    assert rows[0].head_scores.num_rows == 2 * 4 and rows[0].revision == revision
    result = tracking.write_checkpoint(request, revision, rows)
    assert result.failed is None and revision.name in read_table(store, "checkpoints").column("revision").to_pylist()
