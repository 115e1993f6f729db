"""Task runners for the track flow: Prefect's thread runner locally, or a Dask cluster via prefect-dask.

The flow's body is the same for both; only `track.with_options(task_runner=task_runner(request))` changes, and
what differs while a checkpoint task is submitted and waited for (`submitting`, `waiting`, `checkpoint_result`).
The cluster itself (its spec, GPUs, the workers' preload, the scheduler checks) is `dormant_tasks.cluster`.
Prefect is imported by the functions that need it, never here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from dormant_tasks.cluster import check_scheduler, gpu_resources, local_cluster_spec
from dormant_tasks.errors import CheckpointError
from dormant_tasks.extras import require_extra
from dormant_tasks.tracking import Runner, TrackRequest


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


@contextlib.contextmanager
def reporting_to_flow_api() -> Iterator[None]:
    """Tasks submitted to Dask inside this block report to the flow's Prefect API, wherever their worker runs.

    prefect-dask sends only the settings set explicitly with each task; a flow on its temporary server has no API
    URL among them, so a worker elsewhere started a temporary server of its own (and, as another user, failed
    after 180 s per task). Here the URL is set in the settings that travel."""
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


@contextlib.contextmanager
def dask_lines_off() -> Iterator[None]:
    """While the flow waits: Dask's scheduler and nanny warnings stay off the console (the flow's one warning per
    failed checkpoint says it). Restored when the block ends normally; an interrupt or an error keeps them off, as
    the cluster's shutdown warnings are the stop's own doing."""
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
