"""Reproducing the seed leaderboard: its 14 models on WinoGrande under the paper protocol, one `EvalRequest` per
(model, function) (the authors' thresholds, precision, rendering and BOS rule), resumable: a run whose rows the
store holds under that protocol is skipped. Also the side-by-side view of the published values and ours.
"""

from __future__ import annotations

import html

from dormant_tasks.evaluation.authors import AUTHORS_NAMES, authors_thresholds, seed_values
from dormant_tasks.evaluation.leaderboard_rows import AVERAGE_MODEL, OURS, LeaderboardRow, nan_mean
from dormant_tasks.evaluation.leaderboard_table import interval_text, number_text
from dormant_tasks.evaluation.request import EvalRequest, Precision, Rendering, ThresholdSource, parse_chat_date
from dormant_tasks.text import plural

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

    from dormant_tasks.store import MARKER, Table, read_table

    if not (Path(store) / MARKER).is_file():
        return set()
    t = read_table(
        store,
        Table.evaluations,
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


def seed_comparison(rows: list[LeaderboardRow], task: str = "winogrande") -> list[dict]:
    """The seed leaderboard's published values beside ours, one row per (model, function) cell it publishes
    (`published`, `ours` or None, `difference` in points; "ours" is the authors' aggregate), then a row per cell of a
    board model outside the seed (`published` None), and per function an "Average" row over only the models both
    sides have (`n_models` of `n_published`; none when no model is shared)."""
    from dormant_tasks.evaluation.authors import seed_values

    values = seed_values()
    board = {(r.score_fn, r.model): r for r in rows if r.task == task}
    seed = {m for m, _ in values if m != AVERAGE_MODEL}
    published_fns = {fn for _, fn in values}
    out = [
        _comparison(model, fn, published, board.get((fn, model)))
        for (model, fn), published in sorted(values.items())
        if model != AVERAGE_MODEL
    ]
    outside = sorted((m, fn) for fn, m in board if m not in seed and m != AVERAGE_MODEL and fn in published_fns)
    out += [_comparison(model, fn, None, board[(fn, model)]) for model, fn in outside]
    for (model, fn), published in sorted(values.items()):
        if model != AVERAGE_MODEL:
            continue
        of_fn = sorted(m for m, f in values if f == fn and m != AVERAGE_MODEL)
        shared = [m for m in of_fn if (fn, m) in board]
        if not shared:
            continue
        theirs = published if len(shared) == len(of_fn) else nan_mean(values[(m, fn)] for m in shared)
        ours = nan_mean(board[(fn, m)].within_1pt for m in shared)
        of_board = board.get((fn, AVERAGE_MODEL))
        every = len(shared) == len([m for m in {m for _, m in board} if m != AVERAGE_MODEL and (fn, m) in board])
        out.append(
            {
                **_comparison(model, fn, theirs, of_board if every else None),
                "rendering": None,
                "ours": ours,
                "difference": ours - theirs,
                "n_models": len(shared),
                "n_published": len(of_fn),
            }
        )
    return out


_FROM_BOARD = ("best_fn", "never_within", "within_throughout", "low", "high", "n_items", "chosen_on", "reported_on")


def _comparison(model: str, fn: str, published: float | None, mine: LeaderboardRow | None) -> dict:
    ours = None if mine is None else mine.within_1pt
    return {
        "model": model,
        "score_fn": fn,
        "published": published,
        "ours": ours,
        "difference": None if ours is None or published is None else ours - published,
        "rendering": _rendering_of(mine),
        "n_models": None,
        "n_published": None,
        **{k: getattr(mine, k, None) for k in _FROM_BOARD},
    }


def _rendering_of(row: LeaderboardRow | None) -> str | None:
    if row is None or row.chat_template is None:
        return None  # no such cell, or an average over models
    return row.rendering if row.chat_template else "plain"


def _models_shared(r: dict) -> str:
    """ "14 models", or "3 of 14 models" for an average over the models both sides have."""
    n, of = r["n_models"], r["n_published"]
    return plural(n, "model") if n == of else f"{n} of {plural(of, 'model')}"


def format_seed_comparison(rows: list[dict], selection: str = "", interval: str | None = None) -> str:
    """`seed_comparison` rows as a markdown table; `selection` (`Leaderboard.selection`: where "ours" chose its
    function) and `interval` (`Leaderboard.interval`: the method of the intervals) are printed below it."""
    from dormant_tasks.evaluation.metric import NEVER_WITHIN, WITHIN_THROUGHOUT, within_text
    from dormant_tasks.evaluation.rendering import RENDERED_AS

    intervals = any(r.get("low") is not None for r in rows)
    lines = [
        "| model | function | published | ours | "
        + ("95% interval | items | " if intervals else "")
        + "difference (points) | rendering |",
        "|---|---|---:|---:|" + ("---:|---:|" if intervals else "") + "---:|---|",
    ]
    for r in rows:
        fn = r["score_fn"]
        if fn == OURS and r["best_fn"]:
            where = f", chosen on {r['chosen_on']}, reported on {r['reported_on']}" if r.get("chosen_on") else ""
            fn = f"{fn} ({r['best_fn']}{where})"
        model = r["model"] + (f" ({_models_shared(r)})" if r["n_models"] else "")
        rendering = {"plain": "plain text", **RENDERED_AS}.get(r["rendering"], r["rendering"] or "")
        diff = "n/a" if r["difference"] is None else f"{round(r['difference'], 2) + 0.0:+.2f}"  # no "-0.00"
        never = NEVER_WITHIN if r.get("never_within") else WITHIN_THROUGHOUT if r.get("within_throughout") else None
        ours = number_text(r["ours"]) if r["ours"] is None else within_text(r["ours"], never)
        span = interval_text(r.get("low"), r.get("high"), never)
        extra = (span, "" if r.get("n_items") is None else str(r["n_items"])) if intervals else ()
        cells = (model, fn, number_text(r["published"]), ours, *extra, diff, rendering)
        lines.append("| " + " | ".join(html.escape(c, quote=False).replace("|", "\\|") for c in cells) + " |")
    if intervals and interval:
        lines += ["", f"95% intervals of ours: {interval} (docs/SCORES.md §6)"]
    if selection:
        lines += ["", selection]
    return "\n".join(lines)
