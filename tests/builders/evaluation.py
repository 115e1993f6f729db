"""An evaluate request as the library's evaluation functions take it (`evaluation.prepare`), spelled as a test
needs it: the tasks first, the model's name (its id decides the chat template), no store that anything opens."""

from __future__ import annotations

from dormant_tasks.evaluation import EvalRequest


def eval_request(tasks="winogrande", model: str = "tiny", **fields) -> EvalRequest:
    """`EvalRequest(model, tasks, **fields)`; the engine scores ahon_ln unless `score_fns` says otherwise (the
    model's default when none is asked; the request's default would score three functions)."""
    fields.setdefault("score_fns", ("ahon_ln",))
    return EvalRequest(model=model, store="unused-store", tasks=tasks, **fields)
