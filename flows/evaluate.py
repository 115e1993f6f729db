"""The evaluate flow: zero the heads a score function marks, re-score lm-eval tasks, compute the leaderboard metric.

Core functions: `dormant_tasks.evaluation.targets.resolve_targets` (the run's checks and checkpoints, once) and
`evaluate_target` (which runs `evaluation.run_sweep` or `evaluation.evaluate_static`) through
`flows.tasks.evaluate_checkpoint`, one call per target.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from dormant_tasks.evaluation import EvalRequest, EvalTargets, resolve_targets
from flows import tasks


@flow(name="evaluate", log_prints=True, validate_parameters=False)
def evaluate(request: EvalRequest, targets: EvalTargets | None = None) -> list[dict]:
    """Evaluate one checkpoint, or with `request.series` the static tracker mask of every current checkpoint
    of a series; returns the `evaluations` rows written.

    `targets` are the request's checkpoints when the caller resolved them already (the CLI does, to refuse bad
    input before Prefect starts); without them the flow resolves them itself (`resolve_targets`)."""
    resolved = targets if isinstance(targets, EvalTargets) else resolve_targets(EvalRequest.coerce(request))
    request = resolved.request
    get_run_logger().info(
        "%s: %d checkpoint(s), %s mode, tasks %s, request %s",
        resolved.targets[0].model_id,
        len(resolved.targets),
        request.mode,
        ",".join(request.tasks),
        request.request_id,
    )
    rows = []
    for target in resolved.targets:
        rows += tasks.evaluate_checkpoint(request, target)
    return rows
