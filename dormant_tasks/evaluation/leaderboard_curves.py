"""The leaderboard's curves: which stored rows make a cell's sweep curve (the newest protocol of a task at the model's
revision, then the newest run of each function, a repeated quantile's newest row), and the rows they give.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from dormant_tasks.evaluation.leaderboard_rows import PROTOCOL, LeaderboardRow
from dormant_tasks.evaluation.metric import (
    AVERAGE_TASK,
    NEVER_WITHIN,
    WITHIN_THROUGHOUT,
    curve_warnings,
    never_crossed,
    normalised_auc,
    pct_zeroed_within_1pt,
    pct_zeroed_within_1pt_many,
    task_average_curve,
)
from dormant_tasks.evaluation.rendering import RENDERED_AS, chat_text

CurveKey = tuple[str, str, str]  # (score function, model, task)
# (base [resample], accuracy [resample, point]) in %: a curve's accuracies on each redraw of its items
Redrawn = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class SweepCurve:
    quantiles: tuple[float, ...]
    points: tuple[tuple[float, float], ...]  # (% zeroed, accuracy %) in quantile order
    base: float  # %
    protocol: tuple  # the values of PROTOCOL's columns
    warnings: tuple[str, ...] = ()  # stored with its rows (`evaluations.warnings`), or checked here for older rows
    revision: str | None = None
    request_id: str | None = None  # its run, whose `evaluation_items` hold the items behind it
    n_items: int | None = None


def names_text(names) -> str:
    """The first 8 names, sorted, "and N more"."""
    names = sorted(names)
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _run_id(r: dict):
    return ("request", r["request_id"]) if r["request_id"] is not None else ("time", r["evaluated_at"])


def protocol_text(protocol: tuple) -> str:
    shots, metric, chat, bos, rendering, precision, thresholds = protocol
    extra = "".join(
        f", {name} {value}" for name, value in (("precision", precision), ("thresholds", thresholds)) if value
    )
    return f"{shots}-shot {metric}, {chat_text(chat, rendering)}, BOS {bos}{extra}"


def _protocol_of(r: dict) -> tuple:
    return tuple(r[k] for k in PROTOCOL)


def newest_curves(rows_of: dict[str, list[dict]], notes: list[str]) -> dict[CurveKey, SweepCurve]:
    """(fn, model, task) -> the curve of the newest run under the task's newest protocol; `rows_of`: model -> its
    `evaluations` rows at the revision it is shown at."""
    out: dict[CurveKey, SweepCurve] = {}
    for model, rows in rows_of.items():
        tasks: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            tasks[r["task"]].append(r)
        for task in sorted(tasks):
            mine = tasks[task]
            protocol = _protocol_of(max(mine, key=lambda r: r["evaluated_at"]))
            others = {_protocol_of(r) for r in mine} - {protocol}
            if others:
                notes.append(
                    f"{model} {task}: shown as its newest run ({protocol_text(protocol)}); left out: "
                    + "; ".join(sorted(map(protocol_text, others)))
                )
            for fn, run_rows in _newest_runs([r for r in mine if _protocol_of(r) == protocol]).items():
                out[(fn, model, task)] = _curve(task, protocol, run_rows)
    return out


def _newest_runs(rows: list[dict]) -> dict[str, list[dict]]:
    """fn -> the rows of its newest run among `rows` (one protocol)."""
    runs: dict[tuple, list[dict]] = defaultdict(list)  # (fn, run) -> rows
    for r in rows:
        runs[(r["score_fn"], _run_id(r))].append(r)
    newest: dict[str, tuple] = {}
    for (fn, run), run_rows in runs.items():
        rank = (max(r["evaluated_at"] for r in run_rows), str(run))
        if fn not in newest or rank > newest[fn][0]:
            newest[fn] = (rank, run_rows)
    return {fn: run_rows for fn, (_, run_rows) in newest.items()}


def _curve(task: str, protocol: tuple, run_rows: list[dict]) -> SweepCurve:
    """One run's curve of one function."""
    by_q: dict[float, dict] = {}
    for r in sorted(run_rows, key=lambda r: r["evaluated_at"]):  # a repeated quantile: the newest
        by_q[r["quantile"]] = r
    qs = sorted(by_q)
    points = tuple((100.0 * by_q[q]["frac_zeroed"], 100.0 * by_q[q]["accuracy"]) for q in qs)
    newest_row = max(run_rows, key=lambda r: r["evaluated_at"])
    base = 100.0 * newest_row["base_accuracy"]
    stored = newest_row.get("warnings")
    warnings = (
        tuple(stored.split("; "))
        if stored
        else tuple(curve_warnings(task, newest_row["n_items"], newest_row.get("chance"), points, base))
    )
    return SweepCurve(
        tuple(qs),
        points,
        base,
        protocol,
        warnings,
        newest_row["revision"],
        newest_row["request_id"],
        newest_row["n_items"],
    )


def _within_samples(points, samples: Redrawn | None) -> np.ndarray | None:
    """[resample] the metric of each redrawn curve, None without redraws."""
    if samples is None:
        return None
    base, accuracy = samples
    return pct_zeroed_within_1pt_many([x for x, _ in points], accuracy, base)


def curve_row(key: CurveKey, revision: str, c: SweepCurve, samples: Redrawn | None = None) -> LeaderboardRow:
    """The cell of one curve (`samples`: its accuracies on each redraw of its items, for the interval)."""
    fn, model, task = key
    never = never_crossed(c.points, c.base)
    return LeaderboardRow(
        fn,
        model,
        task,
        pct_zeroed_within_1pt(c.points, c.base),
        normalised_auc(c.points),
        c.base,
        revision=revision,
        **dict(zip(PROTOCOL, c.protocol)),
        warnings="; ".join(c.warnings) or None,
        never_within=never == NEVER_WITHIN,
        within_throughout=never == WITHIN_THROUGHOUT,
        n_items=c.n_items,
        samples=_within_samples(c.points, samples),
    )


def task_averages(
    curves: dict[CurveKey, SweepCurve],
    revisions: dict[str, str],
    notes: list[str],
    samples: dict[CurveKey, Redrawn] | None = None,
) -> list[LeaderboardRow]:
    """Per (model, function): the metric of the across-task average curve, when the board has >= 2 tasks and the
    function was swept on each at the same quantiles (else a note says why)."""
    tasks = sorted({task for _, _, task in curves})
    if len(tasks) < 2:
        return []
    out = []
    for model in revisions:
        fns = sorted({fn for fn, m, _ in curves if m == model})
        lacking = [t for t in tasks if not any((fn, model, t) in curves for fn in fns)]
        if lacking:
            notes.append(f"{model}: no across-task average, not evaluated on {', '.join(lacking)}")
            continue
        skipped = []
        for fn in fns:
            mine = {t: c for t in tasks if (c := curves.get((fn, model, t))) is not None}
            if len(mine) < len(tasks) or len({c.quantiles for c in mine.values()}) > 1:
                skipped.append(fn)
                continue
            out.append(_average_row(fn, model, revisions[model], mine, samples or {}))
        if skipped:
            notes.append(
                f"{model}: no across-task average for {', '.join(skipped)} "
                "(not swept on every task, or at other quantiles on one)"
            )
    return out


def _average_row(
    fn: str, model: str, revision: str, mine: dict[str, SweepCurve], samples: dict[CurveKey, Redrawn]
) -> LeaderboardRow:
    """The across-task average row of one function of one model, from its curve on each task (`mine`)."""
    points, base = task_average_curve({t: (c.quantiles, c.points, c.base) for t, c in mine.items()})
    redrawn = [s for t in mine if (s := samples.get((fn, model, t))) is not None]
    averaged = None
    if len(redrawn) == len(mine):  # the average curve of each redraw, point by point
        averaged = (np.mean([b for b, _ in redrawn], axis=0), np.mean([a for _, a in redrawn], axis=0))
    n_items = [c.n_items for c in mine.values() if c.n_items is not None]
    never = never_crossed(points, base)
    return LeaderboardRow(
        fn,
        model,
        AVERAGE_TASK,
        pct_zeroed_within_1pt(points, base),
        normalised_auc(points),
        base,
        revision=revision,
        never_within=never == NEVER_WITHIN,
        within_throughout=never == WITHIN_THROUGHOUT,
        n_items=sum(n_items) if len(n_items) == len(mine) else None,
        samples=_within_samples(points, averaged),
    )


def protocol_notes(curves: dict[CurveKey, SweepCurve], notes: list[str]) -> None:
    """A task whose models were measured with other shots, metric or BOS rule (the chat template may differ)."""
    by_task: dict[str, dict[tuple, set]] = defaultdict(lambda: defaultdict(set))
    for (_, model, task), c in curves.items():
        shots, metric, _, bos, *_ = c.protocol
        by_task[task][(shots, metric, bos)].add(model)
    for task, protocols in sorted(by_task.items()):
        if len(protocols) > 1:
            parts = [f"{s}-shot {m}, BOS {b}: {names_text(ms)}" for (s, m, b), ms in sorted(protocols.items(), key=str)]
            notes.append(f"{task}: models differ in protocol ({'; '.join(parts)}); compare them with care")


def rendering_notes(curves: dict[CurveKey, SweepCurve], notes: list[str]) -> None:
    """Which rendering the chat-templated cells used, per task: lm-eval 0.4.5's (the paper's) or 0.4.13's; rows
    written before the rendering was recorded are 0.4.13's."""
    by_task: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for (_, model, task), c in curves.items():
        if c.protocol[PROTOCOL.index("chat_template")]:
            rendering = c.protocol[PROTOCOL.index("rendering")] or "lm-eval"
            by_task[task][RENDERED_AS.get(rendering, rendering)].add(model)
    for task, renderings in sorted(by_task.items()):
        parts = [f"{how}: {names_text(models)}" for how, models in sorted(renderings.items())]
        notes.append(f"{task}: chat-templated prompts rendered as {'; as '.join(parts)}")
