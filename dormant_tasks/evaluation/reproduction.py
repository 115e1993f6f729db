"""Reproducing the seed leaderboard: its 14 models on WinoGrande under the paper protocol, one run per
(model, function), resumable.

Every run is one `EvalRequest`: the model's `main`, task winogrande (the authors' 5 shots), one score
function, the authors' thresholds (`thresholds=authors`; the random baseline's are its probabilities), their
precision (`precision=paper`), lm-eval 0.4.5's chat rendering (chat template by the authors' id rule) and BOS
rule. A run whose rows are in the store under that protocol is done and skipped, so an interrupted
reproduction resumes where it stopped. The functions are those the authors recorded thresholds of, plus
random: every candidate of their 'Ours' aggregate, and AWFT.

Public API
- `seed_models()`, `seed_functions()`, `reproduction_requests(store, *, limit=None, batch_size=16, device="auto",
  chat_date=None)`
- `done_runs(store) -> {(model, fn)}`: the runs whose rows the store holds under the paper protocol
- `forward_tokens(request, tokenizer) -> int`: the tokens the run's forward passes read (its base run and one
  run per threshold; each distinct input row once, as `DormantLM` runs them)
"""

from __future__ import annotations

from dormant_tasks.evaluation.authors import AUTHORS_NAMES, authors_thresholds, seed_values
from dormant_tasks.requests import EvalRequest, Precision, Rendering, ThresholdSource, parse_chat_date

SEED_TASK = "winogrande"


def seed_models() -> list[str]:
    """The 14 Hub ids of the seed leaderboard, in the order its file names them first."""
    return list(dict.fromkeys(m for m, _ in seed_values() if m != "Average"))


def seed_functions() -> list[str]:
    """Our ids of the functions the authors recorded WinoGrande thresholds of, and random, in their order."""
    recorded = {name for model in authors_thresholds()[SEED_TASK].values() for name in model}
    return [fn for name, fn in AUTHORS_NAMES.items() if name in recorded or name == "Random"]


def reproduction_requests(
    store, *, limit: int | None = None, batch_size: int = 16, device: str = "auto", chat_date: str | None = None
):
    """One request per (seed model, function), models in the seed's order, functions in the authors'; chat
    templates see `chat_date` (YYYY-MM-DD; None: the day each run starts)."""
    return [
        EvalRequest(
            model=model,
            store=str(store),
            tasks=(SEED_TASK,),
            score_fns=(fn,),
            limit=limit,
            batch_size=batch_size,
            device=device,
            rendering=Rendering.PAPER,
            precision=Precision.PAPER,
            thresholds=ThresholdSource.AUTHORS,
            chat_date=chat_date,
        )
        for model in seed_models()
        for fn in seed_functions()
    ]


def done_runs(store, limit: int | None = None) -> set[tuple[str, str]]:
    """(model, fn) whose dynamic WinoGrande rows the store holds under the paper protocol (paper rendering and
    precision, the authors' thresholds), at all 7 quantiles and on as many items as asked."""
    from pathlib import Path

    from dormant_tasks.store.io import MARKER, read_table

    if not (Path(store) / MARKER).is_file():
        return set()
    t = read_table(
        store,
        "evaluations",
        filters={"task": SEED_TASK, "mode": "dynamic", "rendering": "paper", "threshold_source": "authors"},
        columns=["model_id", "score_fn", "quantile", "precision", "n_items"],
    )
    quantiles: dict[tuple[str, str], set] = {}
    for r in t.to_pylist():
        if not str(r["precision"] or "").startswith("paper:"):
            continue
        if limit is not None and r["n_items"] != limit:
            continue
        quantiles.setdefault((r["model_id"], r["score_fn"]), set()).add(r["quantile"])
    return {key for key, qs in quantiles.items() if len(qs) >= 7}


def forward_tokens(request: EvalRequest, tokenizer) -> int:
    """Tokens read by one run's forward passes: (1 base + 1 per quantile) x the summed length of the distinct
    input rows of its requests ((context + continuation)[:-1], as DormantLM batches them)."""
    from dormant_tasks.evaluation.lm_tasks import load_tasks, wants_chat_template
    from dormant_tasks.evaluation.model import encode_pair
    from dormant_tasks.evaluation.sweep import build_requests

    loaded = load_tasks(request.tasks, shots=request.shots, data_source=request.datasets)
    chat = wants_chat_template(request.model, request.chat_template, tokenizer)
    day = parse_chat_date(request.chat_date) if request.chat_date else None
    instances, _ = build_requests(
        loaded, tokenizer, chat, request.rendering, request.system_instruction, request.limit, day
    )
    rows = set()
    for leaf_instances in instances.values():
        for inst in leaf_instances:
            context, continuation = inst.args[0], inst.args[1]
            ctx, cont = encode_pair(tokenizer, context, continuation, request.bos)
            rows.add(tuple(ctx + cont)[:-1])
    return (1 + len(request.quantiles)) * sum(len(r) for r in rows)
