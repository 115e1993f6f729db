"""The offline demo flow: pretrain the tiny OLMo-2 series (once), track it, render its report.

Core functions: `dormant_tasks.tiny.pretrain_tiny` and the `track` flow (with the demo's `TrackRequest`).
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

from dormant_tasks.paths import default_series_dir
from dormant_tasks.tiny import pretrain_tiny
from dormant_tasks.tracking import TrackRequest

from .track import TrackResult, track

DEMO_SERIES = default_series_dir() / "tiny-olmo2"  # under the working directory


@task(name="pretrain-tiny", cache_policy=NONE)
def pretrain(series_dir: str, steps: int, seed: int, threads: int) -> int:
    """Pretrain (or find complete) the tiny series on `threads` CPU threads; returns its number of checkpoints."""
    return len(pretrain_tiny(series_dir, steps=steps, seed=seed, threads=threads, progress=True).checkpoints)


@flow(name="demo", log_prints=True, validate_parameters=False)
def demo(request: TrackRequest, steps: int, seed: int = 0, threads: int = 2) -> TrackResult:
    """Pretrain `steps` steps of the tiny series at `request.source` on `threads` CPU threads (the weights do not
    depend on them), then track it with `request`."""
    request = TrackRequest.coerce(request)
    n = pretrain(request.source, steps, seed, threads)
    get_run_logger().info("tiny OLMo-2 series: %d checkpoints in %s", n, request.source)
    return track(request, progress=True)
