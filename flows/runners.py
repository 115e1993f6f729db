"""Task runners for the track flow: Prefect's thread runner locally, or a Dask cluster via prefect-dask.

The flow code is the same for both; only `track.with_options(task_runner=task_runner(request))` changes.

A local cluster's worker processes are the flow's children, and what they need is passed to them
(`local_cluster_kwargs`): the URL of the flow's Prefect API, so that none starts a temporary server of its own
(a worker killed outright left that server running, orphaned; one Prefect API per run), and the flow's pid, so
that a SIGTERM sent to a worker stops the run as a SIGTERM sent to the flow does (`dask_setup`). A worker that
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
from dormant_tasks.tracking import Runner, TrackRequest

DEFAULT_DASK_WORKERS = 2
# Dask's `allowed_failures` of a local cluster's scheduler: a task whose worker dies is run once more; when that
# worker dies too, the task fails with KilledWorker (Dask's default, 3, would load a model that kills its
# worker four times).
ALLOWED_WORKER_DEATHS = 1
FLOW_PID_ENV = "DORMANT_FLOW_PID"  # set in a local cluster's workers: the process their SIGTERM is passed on to


def task_runner(request: TrackRequest):
    """The request's runner: local threads, or Dask at `request.address` / a local cluster of processes."""
    if request.runner is Runner.LOCAL:
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=2)  # one checkpoint scoring, one downloading
    from prefect_dask import DaskTaskRunner

    if request.address:
        check_scheduler(request.address)
        return DaskTaskRunner(address=request.address)
    return DaskTaskRunner(cluster_kwargs=local_cluster_kwargs(request))


def local_cluster_kwargs(request: TrackRequest) -> dict:
    """`distributed.LocalCluster`'s arguments for a run: one thread per worker process, no dashboard, a task
    run once more after its worker died, and the workers' environment and preload (`dask_setup`)."""
    kwargs = {
        "n_workers": request.workers or DEFAULT_DASK_WORKERS,
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": None,
        "scheduler_kwargs": {"allowed_failures": ALLOWED_WORKER_DEATHS},
        "env": {"PREFECT_API_URL": prefect_api_url(), FLOW_PID_ENV: str(os.getpid())},
        "preload": [__name__],
    }
    if uses_gpu(request.device):
        kwargs["resources"] = {"GPU": 1}
    return kwargs


def prefect_api_url() -> str:
    """The URL of the Prefect API this process's flow runs report to: PREFECT_API_URL's, or that of the temporary
    server this process started (`flows.session.start_prefect`; a client starts it when none runs yet)."""
    from prefect import get_client

    return str(get_client(sync_client=True).api_url)


def dask_setup(worker) -> None:
    """Preload of a local cluster's worker processes (`distributed`'s `preload` hook, run in each worker's main
    thread). Ctrl-C reaches the worker (the terminal's process group) and the flow alike: the flow stops the run
    and closes the cluster, so the worker ignores it instead of dying with a traceback and being restarted. A
    SIGTERM sent to a worker (`kill`, a service manager's stop of every process) is passed on to the flow, which
    stops the run as for its own SIGTERM; a restarted worker would only have scored on."""
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
    warning per failed checkpoint says it in its terms. The logger's level is restored after the block."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def checkpoint_result(future):
    """A checkpoint task's result. A task that Dask gave up on because the workers running it died
    (`KilledWorker`: killed, out of memory) is a `CheckpointError`, recorded as that checkpoint's failure."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker as e:
        raise CheckpointError(
            f"the Dask worker computing it died {e.allowed_failures + 1} times (killed, or out of memory: give the "
            "workers more memory, or fewer per machine with --workers)"
        ) from None


def uses_gpu(device) -> bool:
    """Whether the checkpoint tasks of a Dask run ask for one `GPU` resource: `cuda`/`cuda:N`, and `auto` when a
    CUDA GPU is visible where the flow runs (a local cluster's workers share this machine's GPUs)."""
    device = parse_device(device)
    return is_cuda(device) or (device == Device.AUTO and visible_gpus() > 0)


SCHEDULER_TIMEOUT_S = 10


def check_scheduler(address: str, timeout_s: float = SCHEDULER_TIMEOUT_S) -> None:
    """ConfigError (one line, exit 2) when no Dask scheduler answers at `address` within `timeout_s`."""
    from distributed import Client

    from dormant_tasks.errors import ConfigError

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
