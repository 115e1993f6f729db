"""Task runners for the track flow: Prefect's thread runner locally, or a Dask cluster via prefect-dask.

The flow code is the same for both; only `track.with_options(task_runner=task_runner(request))` changes.

A local cluster's worker processes are the flow's children, and what they need is passed to them
(`local_cluster_spec`): the URL of the flow's Prefect API, so that none starts a temporary server of its own
(a worker killed outright left that server running, orphaned; one Prefect API per run), the flow's pid, so
that a SIGTERM sent to a worker stops the run as a SIGTERM sent to the flow does (`dask_setup`), and on a GPU
host a GPU each. Workers of another cluster (`--address`) are not the flow's: the API's URL travels with each
task instead (`reporting_to_flow_api`). Prefect is imported by the functions that need it, never here: a
worker, or benchmarks/gpu_cluster_check.py, imports this module without it. A worker that
dies while computing a checkpoint (killed, out of memory) is Dask's to handle: its scheduler runs the task once
more elsewhere (`ALLOWED_WORKER_DEATHS`), then fails it with `KilledWorker`, which `checkpoint_result` turns into
the checkpoint's recorded failure; the run goes on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator

from dormant_tasks.devices import Device, is_cuda, parse_device, visible_gpus
from dormant_tasks.errors import CheckpointError
from dormant_tasks.extras import require_extra
from dormant_tasks.tracking import Runner, TrackRequest

DEFAULT_DASK_WORKERS = 2
# Dask's `allowed_failures` of a local cluster's scheduler: a task whose worker dies is run once more; when that
# worker dies too, the task fails with KilledWorker (Dask's default, 3, would load a model that kills its
# worker four times).
ALLOWED_WORKER_DEATHS = 1
FLOW_PID_ENV = "DORMANT_FLOW_PID"  # set in a local cluster's workers: the process their SIGTERM is passed on to
WORKER_GPUS_ENV = "DORMANT_WORKER_GPUS"  # set in a LocalCluster's workers: the GPUs they are pinned to, in turn


def task_runner(request: TrackRequest):
    """The request's runner: local threads, or Dask at `request.address` / a local cluster of processes."""
    if request.runner is Runner.LOCAL:
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=2)  # one checkpoint scoring, one downloading
    require_extra("cluster", "--runner dask")  # (a saved request's runner, which preflight did not see)
    from prefect_dask import DaskTaskRunner

    if request.address:
        check_scheduler(request.address)
        return DaskTaskRunner(address=request.address)
    cluster_class, kwargs = local_cluster_spec(request, prefect_api_url())
    return DaskTaskRunner(cluster_class=cluster_class, cluster_kwargs=kwargs)


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


@contextlib.contextmanager
def reporting_to_flow_api() -> Iterator[None]:
    """Tasks submitted to Dask inside this block report to the flow's Prefect API, wherever their worker runs.

    prefect-dask sends the flow's Prefect settings with each task (`prefect.context.serialize_context`, restored
    on the worker by `hydrated_context`), but only the settings set explicitly: a flow on its temporary server has
    no API URL among them, so a worker that was not given PREFECT_API_URL in its environment (a `dask worker`
    started by someone else, on another host) started a temporary server of its own, under the flow host's
    PREFECT_HOME, which those settings do carry (another user: `Permission denied`, then a 180 s timeout per
    task). Here the URL is set in the settings that travel, so each task carries it: no worker plugin, and no
    reliance on when a worker's Prefect reads its environment."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():  # a server named (PREFECT_API_URL, a test harness): it travels already
        yield
        return
    with temporary_settings(updates={PREFECT_API_URL: prefect_api_url()}):
        yield


def prefect_api_url() -> str:
    """The URL of the Prefect API this process's flow runs report to: PREFECT_API_URL's, or that of the temporary
    server this process started (`flows.session.start_prefect`; a client starts it when none runs yet)."""
    from prefect import get_client

    return str(get_client(sync_client=True).api_url)


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


@contextlib.contextmanager
def dask_lines_off() -> Iterator[None]:
    """While the flow waits for its checkpoints: the warnings and errors of Dask's scheduler and nannies in this
    process (a worker restarted, a task failed because its workers died) stay off the console; the flow's one
    warning per failed checkpoint says it in its terms. The logger's level is restored after the block when it
    ends normally; a block left by an interrupt (Ctrl-C, SIGTERM) or an error keeps it off, since the cluster is
    closed next and its nannies' "still alive ... killing" warnings are the stop's own doing (on a loaded machine
    one reached the console after the run's one interrupted line)."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def checkpoint_result(future):
    """A checkpoint task's result. A task that Dask gave up on because the workers running it died
    (`KilledWorker`: killed, out of memory) is a `CheckpointError`, recorded as that checkpoint's failure."""
    try:
        return future.result()
    except Exception as e:
        if type(e).__name__ != "KilledWorker" or type(e).__module__.split(".")[0] != "distributed":
            raise
        raise CheckpointError(
            f"the Dask worker computing it died {e.allowed_failures + 1} times (killed, or out of memory: give the "
            "workers more memory, or fewer per machine with --workers)"
        ) from None


def window(request: TrackRequest) -> int | None:
    """Checkpoints computed at once: one in this process (one model in memory, the next one downloading), every
    one on a Dask cluster (its scheduler places them on its workers)."""
    return None if request.runner is Runner.DASK else 1


def prefetches(request: TrackRequest) -> bool:
    """Whether a download ahead of its scoring helps: on the local runner it lands on the disk the scoring reads;
    a Dask worker downloads its own checkpoint."""
    return request.runner is Runner.LOCAL


def submitting(request: TrackRequest):
    """Around a checkpoint task's submission: on Dask, its GPU resource (`gpu_resources`) and the flow's Prefect
    API (`reporting_to_flow_api`) travel with it."""
    if request.runner is not Runner.DASK:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(gpu_resources(request.device))
    stack.enter_context(reporting_to_flow_api())
    return stack


def waiting(request: TrackRequest):
    """While the flow waits for a checkpoint: on Dask, its scheduler's and nannies' lines off (`dask_lines_off`)."""
    return dask_lines_off() if request.runner is Runner.DASK else contextlib.nullcontext()


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
