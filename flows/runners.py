"""Task runners for the track flow: Prefect's thread runner locally, or a Dask cluster via prefect-dask.

The flow code is the same for both; only `track.with_options(task_runner=...)` changes.
"""

from __future__ import annotations

from dormant_tasks.errors import ConfigError

RUNNERS = ("local", "dask")


def task_runner(runner: str = "local", address: str | None = None, n_workers: int = 2, device: str = "cpu"):
    """A task runner for `runner`; for dask, `address` of an existing scheduler or a local cluster of processes."""
    if runner == "local":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=2)  # one checkpoint scoring, one downloading
    if runner != "dask":
        raise ConfigError(f"unknown --runner {runner!r}; use one of {', '.join(RUNNERS)}")
    from prefect_dask import DaskTaskRunner

    if address:
        return DaskTaskRunner(address=address)
    cluster_kwargs = {"n_workers": n_workers, "threads_per_worker": 1, "processes": True,
                      "dashboard_address": None}
    if device.startswith("cuda"):
        cluster_kwargs["resources"] = {"GPU": 1}
    return DaskTaskRunner(cluster_kwargs=cluster_kwargs)
