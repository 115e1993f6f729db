"""The evaluate flow: zero the heads a score function marks, re-score WinoGrande, compute the leaderboard metric.

Core functions: `dormant_tasks.leaderboard.evaluate_target` (which runs `evaluation.run_sweep` or
`evaluation.evaluate_static`) through `dormant_tasks.tasks.evaluate_checkpoint`.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from dormant_tasks import tasks
from dormant_tasks.evaluation import check_task
from dormant_tasks.leaderboard import DEFAULT_SCORES, series_targets, single_target
from dormant_tasks.score_functions import parse_score_functions
from dormant_tasks.store import DEFAULT_STORE, check_store


@flow(name="evaluate", log_prints=True)
def evaluate(model: str, revision: str | None = None, task: str = "winogrande", shots: int = 0,
             scores: tuple[str, ...] = DEFAULT_SCORES, mode: str = "dynamic", limit: int | None = None,
             store: str = str(DEFAULT_STORE), series: bool = False, batch_size: int = 16, dtype: str = "float32",
             device: str = "auto", quantiles: tuple[float, ...] | None = None) -> list[dict]:
    """Evaluate one checkpoint (`series=False`) or the static tracker mask of every stored checkpoint of a
    series (`series=True`, `model` = the tracked repo or folder); returns the `evaluations` rows written."""
    log = get_run_logger()
    check_task(task)
    fns = tuple(parse_score_functions(scores))
    check_store(store)
    targets = series_targets(store, model) if series else [single_target(model, revision)]
    if series:
        mode = "static"
    log.info("%s: %d checkpoint(s), %s mode, %s, %d-shot", targets[0].model_id, len(targets), mode, task, shots)
    rows = []
    for target in targets:
        rows += tasks.evaluate_checkpoint(store, target, fns, mode, task, shots, limit, batch_size, dtype, device,
                                          quantiles)
    return rows
