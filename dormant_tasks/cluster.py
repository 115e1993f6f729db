"""A Dask cluster for a track run's checkpoints, without Prefect: the local cluster's spec, each worker's GPU,
the workers' preload, and the checks of a cluster at `--address`.

A local cluster's workers are the flow's children and get what they need in their environment
(`local_cluster_spec`): the flow's Prefect API URL (so none starts a temporary server of its own), the flow's pid
(a SIGTERM to a worker stops the run as one to the flow does: `dask_setup`), and on a GPU host a GPU each. A worker
that dies while computing a checkpoint is Dask's to handle: its scheduler runs the task once more elsewhere
(`ALLOWED_WORKER_DEATHS`), then fails it with `KilledWorker`, which the flow records as the checkpoint's failure.
`flows.runners` wraps this in Prefect's `DaskTaskRunner`; benchmarks/gpu_cluster_check.py uses it without Prefect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import TYPE_CHECKING

from dormant_tasks.devices import Device, is_cuda, parse_device, visible_gpus

if TYPE_CHECKING:
    from dormant_tasks.tracking import TrackRequest

DEFAULT_DASK_WORKERS = 2
# Dask's `allowed_failures` of a local cluster's scheduler: a task whose worker dies is run once more; when that
# worker dies too, the task fails with KilledWorker (Dask's default, 3, would load a model that kills its
# worker four times).


ALLOWED_WORKER_DEATHS = 1


FLOW_PID_ENV = "DORMANT_FLOW_PID"  # set in a local cluster's workers: the process their SIGTERM is passed on to


WORKER_GPUS_ENV = "DORMANT_WORKER_GPUS"  # set in a LocalCluster's workers: the GPUs they are pinned to, in turn


def local_cluster_spec(request: TrackRequest, api_url: str | None = None) -> tuple[str, dict]:
    """The local cluster of a Dask run without --address: (its class, as an import path, and its arguments).

    One thread per worker process, no dashboard, a task run once more after its worker died, and the workers'
    environment and preload (`dask_setup`): `api_url`, the flow's Prefect API (None: no Prefect, as in
    benchmarks/gpu_cluster_check.py), and the flow's pid. With the GPU (`uses_gpu`), one worker per GPU by
    default, each pinned to its own: dask-cuda's `LocalCUDACluster` where the `cluster` extra is installed (it
    sets each worker's CUDA_VISIBLE_DEVICES; `cuda_cluster`), else a `LocalCluster` whose preload does the same
    (`DORMANT_WORKER_GPUS`, `worker_gpu`). Either way each task asks for one `GPU` and each worker has one, so a
    worker scores one checkpoint at a time on its GPU, as `cuda` (its only visible device). Does not import
    Prefect: the GPU check script builds its cluster here, where Prefect is not installed."""
    gpus = gpu_ids() if pins_gpus(request.device) else []
    n_workers = request.workers or len(gpus) or DEFAULT_DASK_WORKERS
    env = {FLOW_PID_ENV: str(os.getpid())}
    if api_url:
        env["PREFECT_API_URL"] = api_url
    kwargs: dict = {
        "n_workers": n_workers,
        "threads_per_worker": 1,
        "dashboard_address": None,
        # the scheduler's HTTP server (health, metrics) on a free port: left at None it tried 8787 and, beside
        # another cluster, printed "UserWarning: Port 8787 is already in use" into the run's output
        "scheduler_kwargs": {"allowed_failures": ALLOWED_WORKER_DEATHS, "dashboard_address": ":0"},
        "preload": [__name__],
    }
    if uses_gpu(request.device):
        kwargs["resources"] = {"GPU": 1}
    if gpus and n_workers <= len(gpus) and _has_dask_cuda():
        # LocalCUDACluster starts processes always (no `processes`); worker i sees GPU i first (`cuda`).
        kwargs["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[:n_workers])
        return f"{__name__}.cuda_cluster", {**kwargs, "env": env}
    if gpus:  # no dask-cuda, or more workers than GPUs (they share them in turn)
        env[WORKER_GPUS_ENV] = ",".join(gpus)
    return "distributed.LocalCluster", {**kwargs, "processes": True, "env": env}


def make_local_cluster(request: TrackRequest, api_url: str | None = None):
    """The local cluster a Dask run of `request` starts (`local_cluster_spec`), started: for scripts and checks
    that use it without Prefect's task runner."""
    import importlib

    path, kwargs = local_cluster_spec(request, api_url)
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)(**kwargs)


def cuda_cluster(env: dict | None = None, **kwargs):
    """dask-cuda's `LocalCUDACluster`, started, whose workers get `env` too: dask-cuda replaces a worker's `env`
    with its CUDA_VISIBLE_DEVICES (dask-cuda 25.x, `new_worker_spec`), which would drop the flow's pid and API."""
    from dask_cuda import LocalCUDACluster

    class _Cluster(LocalCUDACluster):
        def new_worker_spec(self):
            spec = super().new_worker_spec()
            for one in spec.values():
                one["options"]["env"] = {**(env or {}), **one["options"].get("env", {})}
            return spec

    return _Cluster(**kwargs)


def _has_dask_cuda() -> bool:
    import importlib.util

    return importlib.util.find_spec("dask_cuda") is not None


def pins_gpus(device) -> bool:
    """Whether a local cluster gives each worker a GPU of its own: `cuda`, or `auto` with a GPU visible. `cuda:N`
    names one GPU: every worker uses that one, as asked."""
    device = parse_device(device)
    return device == Device.CUDA or (device == Device.AUTO and visible_gpus() > 0)


def gpu_ids() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (its own list when set: indices or
    UUIDs), else 0..n-1 of the visible ones."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and listed.strip() not in ("", "-1"):
        return [x.strip() for x in listed.split(",") if x.strip()]
    return [str(i) for i in range(visible_gpus())]


def worker_gpu(name, gpus: list[str]) -> str:
    """The GPU of a local cluster's worker: a `LocalCluster` names its workers 0, 1, ...; worker i gets the i-th
    GPU, in turn when there are more workers than GPUs. A name that is not a number (a worker started by hand with
    this preload) is hashed stably."""
    try:
        index = int(name)
    except (TypeError, ValueError):
        index = sum(str(name).encode())
    return gpus[index % len(gpus)]


def dask_setup(worker) -> None:
    """Preload of a local cluster's worker processes (`distributed`'s `preload` hook, run in each worker's main
    thread as it starts, before any task). A `LocalCluster` on a GPU host without dask-cuda pins the worker to
    its GPU here (`worker_gpu`): CUDA reads CUDA_VISIBLE_DEVICES when it initialises, at the first task's first
    CUDA call, so setting it now is in time. Ctrl-C reaches the worker (the terminal's process group) and the flow alike: the flow stops the run
    and closes the cluster, so the worker ignores it instead of dying with a traceback and being restarted. A
    SIGTERM sent to a worker (`kill`, a service manager's stop of every process) is passed on to the flow, which
    stops the run as for its own SIGTERM; a restarted worker would only have scored on."""
    gpus = os.environ.get(WORKER_GPUS_ENV)
    if gpus:  # before anything initialises CUDA in this process: tasks import torch when they score
        os.environ["CUDA_VISIBLE_DEVICES"] = worker_gpu(worker.name, gpus.split(","))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed").setLevel(logging.ERROR)  # not its warnings of a task cancelled by the stop
    flow_pid = int(os.environ.get(FLOW_PID_ENV) or 0)
    if flow_pid:
        signal.signal(signal.SIGTERM, lambda signum, frame: _pass_on(flow_pid, signum))


def dask_teardown(worker) -> None:
    """The preload's end, run as a worker closes: a worker stopped while it computes a checkpoint (the run was
    interrupted; its rows would be thrown away) exits at once, since the scoring thread cannot be interrupted and
    the cluster would wait seconds for it before killing the process anyway. At a run's end no thread runs a task
    and the worker closes as usual."""
    if worker.active_threads:
        os._exit(0)


def _pass_on(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):  # the flow is gone already: this worker exits with it (its parent pipe)
        os.kill(pid, signum)


def uses_gpu(device) -> bool:
    """Whether the checkpoint tasks of a Dask run ask for one `GPU` resource: `cuda`/`cuda:N`, and `auto` when a
    CUDA GPU is visible where the flow runs (a local cluster's workers share this machine's GPUs)."""
    device = parse_device(device)
    return is_cuda(device) or (device == Device.AUTO and visible_gpus() > 0)


def gpu_resources(device):
    """Tasks submitted inside ask for one `GPU` resource when the device uses the GPU (`uses_gpu`): on a local
    cluster each worker has one, on another (`--address`) only workers started with `--resources GPU=1` (or
    `dask cuda worker ... --resources GPU=1`) run them, one at a time each."""
    if not uses_gpu(device):  # cuda, cuda:N, or auto on a machine with a GPU
        return contextlib.nullcontext()
    import dask

    return dask.annotate(resources={"GPU": 1})


SCHEDULER_TIMEOUT_S = 10


def dask_workers(request: TrackRequest) -> int:
    """How many checkpoints a Dask run scores at once (a `--budget` round): the workers of the cluster at
    `--address` as its scheduler counts them now, else those of the local cluster it starts."""
    if not request.address:
        return local_cluster_spec(request)[1]["n_workers"]
    from distributed import Client

    with Client(request.address, timeout=SCHEDULER_TIMEOUT_S, set_as_default=False) as client:
        return max(1, len(client.scheduler_info().get("workers", {})))


def check_scheduler(address: str, timeout_s: float = SCHEDULER_TIMEOUT_S) -> None:
    """ConfigError (one line, exit 2) when no Dask scheduler answers at `address` within `timeout_s`, or when its
    workers could not reach the flow's Prefect API (`check_api_reachable`)."""
    from distributed import Client

    from dormant_tasks.errors import ConfigError

    check_api_reachable(address)

    try:
        with Client(address, timeout=timeout_s, set_as_default=False):
            pass
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(
            f"--address {address}: no Dask scheduler answers there within {timeout_s:g} s ({reason}); start one "
            "(`dask scheduler`, workers with `dask worker ADDRESS`), fix the address, or drop --address for a "
            "local cluster"
        ) from None


def check_api_reachable(address: str) -> None:
    """ConfigError when a scheduler away from loopback (its workers on other hosts, as far as the flow can tell)
    would get tasks reporting to a temporary Prefect server: that server listens on this host's 127.0.0.1 only,
    so a worker elsewhere cannot reach it and each of its tasks fails after a timeout. Refused before anything
    starts; the fix is a server that keeps running, named by PREFECT_API_URL."""
    from dormant_tasks.errors import ConfigError

    if os.environ.get("PREFECT_API_URL") or is_loopback(address):
        return
    raise ConfigError(
        f"--address {address}: workers away from this host cannot reach the temporary Prefect server that a run "
        "starts on 127.0.0.1; start one they can reach (`prefect server start --host 0.0.0.0`) and "
        "`export PREFECT_API_URL=http://THIS_HOST:4200/api`, or run the scheduler on loopback"
    )


def is_loopback(address: str) -> bool:
    """Whether a Dask address (`tcp://HOST:PORT`, `HOST:PORT`, `inproc://...`) names this host's loopback: a
    127.x/::1 address, `localhost`, or a name that resolves to loopback only."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    if address.startswith("inproc://"):
        return True
    host = urlsplit(address if "://" in address else f"tcp://{address}").hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if host == "localhost":
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False  # unknown: the scheduler check says so
    return bool(infos) and all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback for i in infos)
