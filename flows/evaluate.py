"""The evaluate flow: zero the heads a score function marks, re-score lm-eval tasks, compute the leaderboard metric.

Core functions: `dormant_tasks.evaluation.targets.evaluate_target` (which runs `evaluation.run_sweep` or
`evaluation.evaluate_static`) through `flows.tasks.evaluate_checkpoint`, one call per target.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from dormant_tasks.evaluation import EvalRequest, check_task_names, request_targets
from dormant_tasks.store import check_store
from flows import tasks


@flow(name="evaluate", log_prints=True, validate_parameters=False)
def evaluate(request: EvalRequest) -> list[dict]:
    """Evaluate one checkpoint, or with `request.series` the static tracker mask of every current checkpoint
    of a series; returns the `evaluations` rows written."""
    request = EvalRequest.coerce(request)
    log = get_run_logger()
    check_task_names(request.tasks)
    check_store(request.store)
    targets = request_targets(request)
    log.info(
        "%s: %d checkpoint(s), %s mode, tasks %s, request %s",
        targets[0].model_id,
        len(targets),
        request.mode,
        ",".join(request.tasks),
        request.request_id,
    )
    rows = []
    for target in targets:
        rows += tasks.evaluate_checkpoint(request, target)
    return rows
