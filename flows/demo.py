"""The offline demo flow: pretrain the tiny OLMo-2 series (once), track it, render its report.

Core functions: `dormant_tasks.tiny.pretrain_tiny` and the `track` flow.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

from dormant_tasks.store import DEFAULT_STORE
from dormant_tasks.tiny import DEFAULT_STEPS, pretrain_tiny

from .track import track

DEMO_SERIES = Path(__file__).resolve().parent.parent / "data" / "series" / "tiny-olmo2"


@task(name="pretrain-tiny", cache_policy=NONE)
def pretrain(series_dir: str, steps: int, seed: int) -> int:
    """Pretrain (or find complete) the tiny series; returns its number of checkpoints."""
    return len(pretrain_tiny(series_dir, steps=steps, seed=seed, progress=True).checkpoints)


@flow(name="demo", log_prints=True)
def demo(series_dir: str = str(DEMO_SERIES), store: str = str(DEFAULT_STORE), steps: int = DEFAULT_STEPS,
         seed: int = 0, limit: int = 128, report: bool = True, reports_dir: str | None = None) -> dict:
    log = get_run_logger()
    n = pretrain(series_dir, steps, seed)
    log.info("tiny OLMo-2 series: %d checkpoints in %s", n, series_dir)
    return track(source=series_dir, store=store, limit=limit, report=report, reports_dir=reports_dir,
                 progress=True)
