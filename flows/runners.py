"""Task runners for the track flow: Prefect's thread runner locally, or a Dask cluster via prefect-dask.

The flow code is the same for both; only `track.with_options(task_runner=task_runner(request))` changes.
"""

from __future__ import annotations

from dormant_tasks.devices import Device, is_cuda, parse_device, visible_gpus
from dormant_tasks.tracking import Runner, TrackRequest

DEFAULT_DASK_WORKERS = 2


def task_runner(request: TrackRequest):
    """The request's runner: local threads, or Dask at `request.address` / a local cluster of processes."""
    if request.runner is Runner.LOCAL:
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=2)  # one checkpoint scoring, one downloading
    from prefect_dask import DaskTaskRunner

    if request.address:
        check_scheduler(request.address)
        return DaskTaskRunner(address=request.address)
    cluster_kwargs = {
        "n_workers": request.workers or DEFAULT_DASK_WORKERS,
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": None,
    }
    if uses_gpu(request.device):
        cluster_kwargs["resources"] = {"GPU": 1}
    return DaskTaskRunner(cluster_kwargs=cluster_kwargs)


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
