"""The leaderboard across models, read from the store's `evaluations` (the paper's tables; docs/SCORES.md §6).

One **cell** per (score function, model, task): the "% of heads zeroed within 1 point"
(`metric.pct_zeroed_within_1pt`) of that function's dynamic sweep, with the sweep's normalised AUC and the
base accuracy, all in %. Around the cells:
- task `average`, per (model, function): the same metric of the across-task average curve
  (`metric.task_average_curve`) over every task of the board, when the board has >= 2 tasks and the
  function was swept on each of them at the same quantiles (else no such row, and a note says why);
- model `Average`, per (function, task): the mean over models of their cells (`n_models` of them);
- function `ours`, per (model, task): the authors' Table 2 aggregate ("Ours"), the largest value over the
  functions of their notebook's list except AWFT, the random baseline included and fhon/fhon_ln not (their list
  has neither), ties going to the first in that list's order (`authors.AGGREGATE_ORDER`); with `awft`'s own cells beside it and `ours - awft`, the difference; each with its
  `Average` over models: the seed's 'Ours (Aggregate) Average 14.45' vs 'AWFT Average 6.9';
- function `best`, shown as "best of all functions", per (model, task): the function with the largest value
  of all, AWFT included (ties: the larger AUC, then the name; the random baseline is no candidate), and its
  `Average` over models.

Which rows make a cell:
- `mode` dynamic only: static rows zero the tracker's mask, they are no sweep;
- **one revision per model**: `revision` for every model when given; else `main` (the released model)
  when it was evaluated on the board's tasks, else the model's latest evaluated checkpoint in training order
  (`checkpoints.series_sort_key`). A leaderboard compares trained models, so the most-trained checkpoint
  stands for a model without `main`; a checkpoint evaluated later is not "newer". Notes name every model
  shown at another revision than `main`;
- **one protocol per (model, task)**: the (shots, metric, chat_template, bos) of the newest run of that
  task at that revision; other protocols of it are left out, with a note. Models may differ in protocol
  (the paper's rule gives Instruct models the chat template); a note names a task whose models differ in
  shots, metric or BOS rule;
- **the newest run wins**: per (model, revision, task, protocol, function), the rows of the run with the
  latest `evaluated_at`. A run is one `request_id` (rows upgraded from schema version 1 have none: one
  `evaluated_at`).

Public API
How sure each value is (`intervals`, docs/SCORES.md §6): with `resampling`, every row whose curves' runs stored
their items (`dormant evaluate --log-samples`) gets a 95% percentile interval (`low`, `high`) from a paired
bootstrap over items, the same redraws for the base run, every threshold, function and model, so averages, the
best function and "ours - awft" are recomputed per redraw (the best function's interval holds its selection:
the largest value per redraw). `n_items` is the items behind a value. A curve that never crossed the line
`base - 1` keeps the authors' 0 as its value and says why (`never`: "never within 1 point" or "within 1 point
throughout"). With `select_on` ("even" or "odd"), "ours" and "best" choose their function on the items of that
`doc_id` parity and report its value on the others (`chosen_on`, `reported_on`); by default they choose and
report on the same items, as the authors did, and a note says so.

Public API
- `load_leaderboard(store, models=None, tasks=None, revision=None, resampling=None, select_on=None) ->
  Leaderboard` (`build_leaderboard` on a table already read)
- `format_leaderboard_table(rows, fmt)`: `markdown`, `csv` or `latex`, sorted by function then model
- `auc_agreement(rows, task=None) -> (models, matrix)`: Spearman rank correlation of the functions' AUCs
  between every pair of models; `agreement_task(rows)` is the task it uses by default
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.checkpoints import MAIN, parse_revision_name, series_sort_key
from dormant_tasks.engine import DETERMINISTIC_IDS, SCORE_FUNCTIONS
from dormant_tasks.errors import ConfigError, StoreError, did_you_mean
from dormant_tasks.evaluation.intervals import HALVES, ItemResampling, curve_items, select_half
from dormant_tasks.evaluation.metric import (
    AUC_UNIT,
    AVERAGE_TASK,
    NEVER_WITHIN,
    WARNED,
    WITHIN_THROUGHOUT,
    curve_warnings,
    never_crossed,
    normalised_auc,
    pct_zeroed_within_1pt,
    pct_zeroed_within_1pt_many,
    task_average_curve,
    within_text,
)
from dormant_tasks.statistics import bootstrap_interval
from dormant_tasks.store import read_table

AVERAGE_MODEL = "Average"  # the mean over models
BEST = "best"  # the best function of a model, of all functions
OURS = "ours"  # the authors' aggregate: the best function but AWFT, random included
OURS_VS_AWFT = "ours - awft"  # the aggregate's lead over AWFT, in points of % zeroed
AWFT = "awft"
_AGGREGATE_RANK = {OURS: 1, OURS_VS_AWFT: 2, BEST: 3}  # shown after the functions, in this order
LEADERBOARD_FORMATS = ("markdown", "csv", "latex")
BASELINES = frozenset(SCORE_FUNCTIONS) - frozenset(DETERMINISTIC_IDS)  # never the best function

_READ = [
    *("model_id", "revision", "stage", "step", "tokens", "task", "shots", "mode", "score_fn", "quantile"),
    *("frac_zeroed", "accuracy", "base_accuracy", "metric", "chat_template", "bos", "request_id", "evaluated_at"),
    *("rendering", "precision", "threshold_source", "n_items", "chance", "warnings"),
]
# what makes two runs comparable; rendering, precision and threshold source are null in rows written before them
_PROTOCOL = ("shots", "metric", "chat_template", "bos", "rendering", "precision", "threshold_source")
_NO_PROTOCOL = (None,) * len(_PROTOCOL)  # the protocol columns of an average row
HEADER = ("score function", "model", "task", "% zeroed within 1 point", f"AUC ({AUC_UNIT})", "base accuracy")
INTERVAL_HEADER = ("95% interval", "items")  # after the value, when any row has an interval
CSV_COLUMNS = (
    *("score_fn", "best_fn", "model", "revision", "task", "shots", "metric", "chat_template", "bos"),
    *("rendering", "precision", "threshold_source"),
    *("within_1pt", "auc", "base_accuracy", "n_models", "warnings"),
    *("never_within", "within_throughout", "low", "high", "n_items", "interval", "chosen_on", "reported_on"),
)
_ITEM_COLUMNS = ["model_id", "revision", "task", "score_fn", "quantile", "doc_id", "correct", "request_id"]
SAME_ITEMS = (
    "ours and best of all functions: each chosen and reported on the same items, as the authors did, so they read "
    "high (the largest of many noisy values; benchmarks/leaderboard_intervals.py); `--select-on even` chooses on "
    "the even items and reports on the odd ones"
)


@dataclass(frozen=True)
class Leaderboard:
    rows: list[dict]  # cells, averages and best functions, sorted (see `_order`); values in %
    revisions: dict[str, str]  # model -> the revision it is shown at
    notes: tuple[str, ...]  # what was left out or differs, one line each
    warnings: tuple[str, ...] = ()  # "model task function: warning" of every shown curve that has one
    interval: str | None = None  # the method of the rows' `low`/`high` (`intervals.method_text`), None: none drawn
    selection: str = ""  # on which items "ours" and "best" chose their function and reported its value


# ---------------------------------------------------------------------------------------------- reading


def load_leaderboard(
    store,
    models=None,
    tasks=None,
    revision: str | None = None,
    resampling: ItemResampling | None = None,
    select_on: str | None = None,
) -> Leaderboard:
    """The leaderboard of the store's evaluations; StoreError when it holds none to rank. With `resampling` or
    `select_on`, the stored `evaluation_items` are read too."""
    evaluations = read_table(store, "evaluations")
    if evaluations.num_rows == 0:
        raise StoreError(
            f"store {str(store)!r} holds no evaluations: run `dormant evaluate --model ...` on each model first"
        )
    if not pc.any(pc.equal(evaluations.column("mode"), "dynamic")).as_py():
        raise StoreError(
            f"store {str(store)!r} holds only static evaluations (the tracker's masks); the leaderboard ranks "
            "dynamic sweeps: run `dormant evaluate --model ... --mode dynamic`"
        )
    items = None
    if resampling is not None or select_on is not None:
        items = read_table(store, "evaluation_items", columns=_ITEM_COLUMNS).to_pylist()
    return build_leaderboard(
        evaluations,
        models=models,
        tasks=tasks,
        revision=revision,
        items=items,
        resampling=resampling,
        select_on=select_on,
    )


def _rows(evaluations: pa.Table) -> list[dict]:
    t = evaluations.select(_READ)
    t = t.set_column(_READ.index("evaluated_at"), "evaluated_at", t.column("evaluated_at").cast(pa.int64()))
    return t.filter(pc.equal(t.column("mode"), "dynamic")).to_pylist()


def _listing(names) -> str:
    names = sorted(names)
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def build_leaderboard(
    evaluations: pa.Table,
    models=None,
    tasks=None,
    revision: str | None = None,
    *,
    items: list[dict] | None = None,
    resampling: ItemResampling | None = None,
    select_on: str | None = None,
) -> Leaderboard:
    """The leaderboard of an `evaluations` table (its schema: `store.SCHEMAS["evaluations"]`); `items`, the
    `evaluation_items` rows behind it, for the intervals (`resampling`) and `select_on`."""
    if select_on is not None and select_on not in HALVES:
        raise ConfigError(f"--select-on {select_on}: choose {' or '.join(HALVES)} (the items' doc_id parity)")
    known_models = set(evaluations.column("model_id").to_pylist())
    rows = _rows(evaluations)
    notes: list[str] = []
    swept = {r["model_id"] for r in rows}
    for m in models or ():
        if m not in known_models:
            raise ConfigError(
                f"--model {m}: no evaluations of it{did_you_mean(m, known_models)}; evaluated: {_listing(known_models)}"
            )
        if m not in swept:
            raise ConfigError(
                f"--model {m}: only static evaluations of it; run `dormant evaluate --model {m} --mode dynamic`"
            )
    if models:
        rows = [r for r in rows if r["model_id"] in set(models)]
    if tasks:
        known_tasks = {r["task"] for r in rows}
        for t in tasks:
            if t not in known_tasks:
                raise ConfigError(
                    f"--tasks {t}: no dynamic sweep of it{did_you_mean(t, known_tasks)}; swept: {_listing(known_tasks)}"
                )
        rows = [r for r in rows if r["task"] in set(tasks)]
    by_model: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_model[r["model_id"]].append(r)
    for m in dict.fromkeys(models or ()):
        if m not in by_model:  # swept, but not on these tasks
            notes.append(f"{m} left out: no dynamic sweep of {', '.join(tasks)}")
    revisions = _choose_revisions(by_model, revision, explicit=bool(models), notes=notes)
    curves = _curves({m: [r for r in by_model[m] if r["revision"] == rev] for m, rev in revisions.items()}, notes)
    found, weights = _items_behind(curves, rows, items, resampling, notes)
    samples = {key: c.accuracies(weights) for key, c in found.items()} if weights else {}
    cells = [_cell(fn, m, revisions[m], task, c, samples.get((fn, m, task))) for (fn, m, task), c in curves.items()]
    cells += _task_averages(curves, revisions, notes, samples)
    out = cells + _model_averages(cells)
    if select_on is None:
        ours, best, others = _ours(cells), _best(cells), cells
        selection = SAME_ITEMS
    else:
        ours, best, others = _chosen_elsewhere(curves, found, weights, revisions, select_on, notes)
        report_on = HALVES[1 - HALVES.index(select_on)]
        selection = (
            f"ours and best of all functions: each chosen on the {select_on} items and its value reported on the "
            f"{report_on} ones (--select-on {select_on})"
        )
    differences = _differences(ours, others)
    out += ours + _model_averages(ours) + differences + _model_averages(differences) + best + _model_averages(best)
    _protocol_notes(curves, notes)
    _rendering_notes(curves, notes)
    warnings = tuple(f"{m} {task} {fn}: {w}" for (fn, m, task), c in sorted(curves.items()) for w in c.warnings)
    for r in out:
        low_high = bootstrap_interval(r["_samples"]) if r["_samples"] is not None else (None, None)
        r["low"], r["high"] = low_high
    interval = resampling.method if resampling is not None and weights else None
    shown = [
        {k: v for k, v in r.items() if k != "_samples"} | {"interval": interval if r["low"] is not None else None}
        for r in out
    ]
    return Leaderboard(sorted(shown, key=_order), revisions, tuple(notes), warnings, interval, selection)


def _items_behind(curves, rows, items, resampling, notes) -> tuple[dict, dict | None]:
    """The items behind each curve (`intervals.curve_items`) and the redraws shared by all of them."""
    if items is None:
        return {}, None
    tasks_of_run: dict = defaultdict(set)
    for r in rows:
        tasks_of_run[r["request_id"]].add(r["task"])
    wanted = {key: (c.revision, c.request_id, c.quantiles, c.points, c.base) for key, c in curves.items()}
    found, found_notes = curve_items(items, wanted, tasks_of_run)
    notes += found_notes
    lacking = {f"{m} {task}" for (_, m, task) in curves.keys() - found.keys()}
    if not found:
        notes.append("no intervals: no shown run stored its items (evaluate with --log-samples)")
    elif lacking:
        notes.append(f"no interval for {_listing(lacking)}: their runs stored no items (evaluate with --log-samples)")
    weights = resampling.weights(list(found.values())) if resampling is not None and found else None
    return found, weights


def _chosen_elsewhere(curves, found, weights, revisions, select_on: str, notes) -> tuple[list, list, list]:
    """ "ours" and "best" chosen on the items of `select_on`'s doc_id parity, reported on the others: (ours, best,
    the cells on the reporting items)."""
    if not found:
        raise ConfigError(
            "--select-on needs the items behind the curves, and no shown run stored them: evaluate with --log-samples"
        )
    report_on = HALVES[1 - HALVES.index(select_on)]
    halves = {}
    for half in (select_on, report_on):
        half_curves, half_samples = {}, {}
        for key, c in found.items():
            mine = c.subset(select_half(c.keys, half))
            x = [px for px, _ in curves[key].points]
            ys = 100.0 * mine.correct.mean(axis=1) if mine.keys else np.full(len(x), np.nan)
            half_curves[key] = replace(
                curves[key], points=tuple(zip(x, ys.tolist())), base=100.0 * mine.base.mean(), n_items=len(mine.keys)
            )
            if weights:
                half_samples[key] = mine.accuracies(weights)
        cells = [
            _cell(fn, m, revisions[m], t, c, half_samples.get((fn, m, t))) for (fn, m, t), c in half_curves.items()
        ]
        halves[half] = cells + _task_averages(half_curves, revisions, [], half_samples)
    where = {"chosen_on": f"{select_on} items", "reported_on": f"{report_on} items"}
    ours = [{**r, **where} for r in _ours(halves[report_on], chosen_by=halves[select_on])]
    best = [{**r, **where} for r in _best(halves[report_on], chosen_by=halves[select_on])]
    if len(found) < len(curves):
        notes.append("ours and best of all functions: only the curves whose runs stored their items can be chosen")
    return ours, best, [{**r, **where} for r in halves[report_on]]


def _revision_key(r: dict) -> tuple:
    parsed = parse_revision_name(r["revision"])
    ingredient = parsed.ingredient if parsed is not None else None
    return series_sort_key(r["revision"], r["stage"], ingredient, r["step"], r["tokens"])


def _choose_revisions(by_model: dict, revision: str | None, explicit: bool, notes: list[str]) -> dict[str, str]:
    out = {}
    if revision is not None:
        missing = sorted(m for m, rows in by_model.items() if not any(r["revision"] == revision for r in rows))
        if missing and explicit:
            raise ConfigError(
                f"--revision {revision}: {missing[0]} has no dynamic sweep of it; "
                f"its revisions: {_listing({r['revision'] for r in by_model[missing[0]]})}"
            )
        if len(missing) == len(by_model):
            known = {r["revision"] for rows in by_model.values() for r in rows}
            raise ConfigError(
                f"--revision {revision}: no model has a dynamic sweep of it{did_you_mean(revision, known)}; "
                f"swept: {_listing(known)}"
            )
        if missing:
            notes.append(f"left out, not evaluated at {revision}: {_listing(missing)}")
        return {m: revision for m in sorted(by_model) if m not in missing}
    for m in sorted(by_model):
        latest = max(by_model[m], key=_revision_key)["revision"]
        out[m] = latest
        if latest != MAIN:
            notes.append(f"{m} is shown at {latest}: no `main` evaluation, its latest evaluated checkpoint")
    return out


@dataclass(frozen=True)
class _Curve:
    quantiles: tuple[float, ...]
    points: tuple[tuple[float, float], ...]  # (% zeroed, accuracy %) in quantile order
    base: float  # %
    protocol: tuple  # (shots, metric, chat_template, bos)
    warnings: tuple[str, ...] = ()  # stored with its rows (`evaluations.warnings`), or checked here for older rows
    revision: str | None = None
    request_id: str | None = None  # its run, whose `evaluation_items` hold the items behind it
    n_items: int | None = None


def _run_id(r: dict):
    return ("request", r["request_id"]) if r["request_id"] is not None else ("time", r["evaluated_at"])


def _protocol_text(protocol: tuple) -> str:
    from dormant_tasks.evaluation.rendering import RENDERED_AS

    shots, metric, chat, bos, rendering, precision, thresholds = protocol
    chat_text = "no chat template"
    if chat:
        chat_text = "chat template" + (f" rendered as {RENDERED_AS[rendering]}" if rendering in RENDERED_AS else "")
    extra = "".join(
        f", {name} {value}" for name, value in (("precision", precision), ("thresholds", thresholds)) if value
    )
    return f"{shots}-shot {metric}, {chat_text}, BOS {bos}{extra}"


def _curves(rows_of: dict[str, list[dict]], notes: list[str]) -> dict[tuple, _Curve]:
    """(fn, model, task) -> the curve of the newest run under the task's newest protocol."""
    out: dict[tuple, _Curve] = {}
    for model, rows in rows_of.items():
        tasks: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            tasks[r["task"]].append(r)
        for task in sorted(tasks):
            mine = tasks[task]
            newest = max(mine, key=lambda r: r["evaluated_at"])
            protocol = tuple(newest[k] for k in _PROTOCOL)
            others = {tuple(r[k] for k in _PROTOCOL) for r in mine} - {protocol}
            if others:
                notes.append(
                    f"{model} {task}: shown as its newest run ({_protocol_text(protocol)}); left out: "
                    + "; ".join(sorted(map(_protocol_text, others)))
                )
            runs: dict[tuple, list[dict]] = defaultdict(list)  # (fn, run) -> rows
            for r in mine:
                if tuple(r[k] for k in _PROTOCOL) == protocol:
                    runs[(r["score_fn"], _run_id(r))].append(r)
            newest_run: dict[str, tuple] = {}
            for (fn, run), run_rows in runs.items():
                rank = (max(r["evaluated_at"] for r in run_rows), str(run))
                if fn not in newest_run or rank > newest_run[fn][0]:
                    newest_run[fn] = (rank, run_rows)
            for fn, (_, run_rows) in newest_run.items():
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
                out[(fn, model, task)] = _Curve(
                    tuple(qs),
                    points,
                    base,
                    protocol,
                    warnings,
                    newest_row["revision"],
                    newest_row["request_id"],
                    newest_row["n_items"],
                )
    return out


def _row(
    fn,
    model,
    revision,
    task,
    within,
    auc,
    base,
    *,
    protocol=_NO_PROTOCOL,
    best_fn=None,
    n_models=None,
    warnings=(),
    never=None,
    n_items=None,
    samples=None,
) -> dict:
    return {
        "score_fn": fn,
        "best_fn": best_fn,
        "model": model,
        "revision": revision,
        "task": task,
        **dict(zip(_PROTOCOL, protocol)),
        "within_1pt": within,
        "auc": auc,
        "base_accuracy": base,
        "n_models": n_models,
        "warnings": "; ".join(warnings) or None,
        "never_within": never == NEVER_WITHIN,
        "within_throughout": never == WITHIN_THROUGHOUT,
        "n_items": n_items,
        "chosen_on": None,
        "reported_on": None,
        "_samples": samples,  # [resample] the value per redraw of the items, None: no interval
    }


def _within_samples(points, samples) -> np.ndarray | None:
    """[resample] the metric of each redrawn curve: `samples` (base [resample], accuracy [resample, point])."""
    if samples is None:
        return None
    base, accuracy = samples
    return pct_zeroed_within_1pt_many([x for x, _ in points], accuracy, base)


def _cell(fn, model, revision, task, c: _Curve, samples=None) -> dict:
    within = pct_zeroed_within_1pt(c.points, c.base)
    return _row(
        *(fn, model, revision, task, within, normalised_auc(c.points), c.base),
        protocol=c.protocol,
        warnings=c.warnings,
        never=never_crossed(c.points, c.base),
        n_items=c.n_items,
        samples=_within_samples(c.points, samples),
    )


def _task_averages(
    curves: dict[tuple, _Curve], revisions: dict[str, str], notes: list[str], samples: dict | None = None
) -> list[dict]:
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
            found = {t: curves.get((fn, model, t)) for t in tasks}
            mine = {t: c for t, c in found.items() if c is not None}
            if len(mine) < len(found) or len({c.quantiles for c in mine.values()}) > 1:
                skipped.append(fn)
                continue
            points, base = task_average_curve({t: (c.quantiles, c.points, c.base) for t, c in mine.items()})
            within = pct_zeroed_within_1pt(points, base)
            redrawn = [s for t in tasks if (s := (samples or {}).get((fn, model, t))) is not None]
            averaged = None
            if len(redrawn) == len(tasks):  # the average curve of each redraw, point by point
                averaged = (np.mean([b for b, _ in redrawn], axis=0), np.mean([a for _, a in redrawn], axis=0))
            n_items = [c.n_items for c in mine.values()]
            out.append(
                _row(
                    *(fn, model, revisions[model], AVERAGE_TASK, within, normalised_auc(points), base),
                    never=never_crossed(points, base),
                    n_items=None if None in n_items else sum(n_items),
                    samples=_within_samples(points, averaged),
                )
            )
        if skipped:
            notes.append(
                f"{model}: no across-task average for {', '.join(skipped)} "
                "(not swept on every task, or at other quantiles on one)"
            )
    return out


def nan_mean(values) -> float:
    values = list(values)
    return float(np.mean(values)) if values else math.nan


def _joint(rows: list[dict], combine) -> np.ndarray | None:
    """`combine` over the rows' redrawn values ([row, resample] -> [resample]); None unless every row has them."""
    found = [r["_samples"] for r in rows]
    return None if not found or any(s is None for s in found) else combine(np.array(found))


def _same(values) -> int | None:
    values = set(values)
    return values.pop() if len(values) == 1 else None


def _model_averages(rows: list[dict]) -> list[dict]:
    """Per (function, task): the mean over models (per redraw too: the models were redrawn on the same items)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["score_fn"], r["task"])].append(r)
    return [
        {
            **_row(
                fn,
                AVERAGE_MODEL,
                None,
                task,
                nan_mean(r["within_1pt"] for r in mine),
                nan_mean(r["auc"] for r in mine),
                nan_mean(r["base_accuracy"] for r in mine),
                n_models=len(mine),
                n_items=_same(r["n_items"] for r in mine),
                samples=_joint(mine, lambda s: s.mean(axis=0)),
            ),
            "chosen_on": mine[0]["chosen_on"],
            "reported_on": mine[0]["reported_on"],
            # an average of the authors' 0s says why as they do when every model's does; else it counts them
            "never_within": all(r["never_within"] for r in mine),
            "within_throughout": all(r["within_throughout"] for r in mine),
            "zeros_in": sum(_zeros_in(r) for r in mine),
        }
        for (fn, task), mine in groups.items()
    ]


def _chosen(groups: dict[tuple, list[dict]], top, label: str, reported: dict | None) -> list[dict]:
    """Per group, the row of the function `top` picks, relabelled `label` (FN in `best_fn`): its value on the
    same items, with the group's largest value per redraw (the selection redone on each); or, with `reported`
    ((fn, model, task) -> row on other items), the chosen function's row on those."""
    out = []
    for (model, task), mine in groups.items():
        chosen = top(mine)
        if reported is None:
            row = {**chosen, "_samples": _joint(mine, lambda s: s.max(axis=0))}
        elif (key := (chosen["score_fn"], model, task)) in reported:
            row = dict(reported[key])
        else:
            continue
        out.append({**row, "score_fn": label, "best_fn": chosen["score_fn"]})
    return out


def _ours(cells: list[dict], chosen_by: list[dict] | None = None) -> list[dict]:
    """Per (model, task): the authors' "Ours", the largest value of their notebook's functions but AWFT (random
    included, fhon/fhon_ln not), the first in that list's order among equal values (their max over their list).
    With `chosen_by` (the cells on other items), the function is chosen there and its value read in `cells`."""
    from dormant_tasks.evaluation.authors import AGGREGATE_ORDER

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in chosen_by if chosen_by is not None else cells:
        if r["score_fn"] in AGGREGATE_ORDER and r["score_fn"] != AWFT:
            groups[(r["model"], r["task"])].append(r)
    top = lambda mine: min(mine, key=lambda r: (-r["within_1pt"], AGGREGATE_ORDER.index(r["score_fn"])))  # noqa: E731
    return _chosen(groups, top, OURS, _keyed(cells) if chosen_by is not None else None)


def _keyed(cells: list[dict]) -> dict[tuple, dict]:
    return {(r["score_fn"], r["model"], r["task"]): r for r in cells}


def _differences(ours: list[dict], cells: list[dict]) -> list[dict]:
    """Per (model, task) with both: "Ours" minus AWFT, in points of % of heads zeroed within 1 point (per redraw
    too, both on the same redrawn items)."""
    awft = {(r["model"], r["task"]): r for r in cells if r["score_fn"] == AWFT}
    return [
        {
            **r,
            "score_fn": OURS_VS_AWFT,
            "within_1pt": r["within_1pt"] - awft[key]["within_1pt"],
            "auc": math.nan,
            "best_fn": None,
            "never_within": False,
            "within_throughout": False,
            "zeros_in": _zeros_in(r) + _zeros_in(awft[key]),
            "_samples": _joint([r, awft[key]], lambda s: s[0] - s[1]),
        }
        for r in ours
        if (key := (r["model"], r["task"])) in awft
    ]


def _best(cells: list[dict], chosen_by: list[dict] | None = None) -> list[dict]:
    """Per (model, task): the function with the largest value (then the larger AUC, then the first name); with
    `chosen_by`, chosen there and its value read in `cells`."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in chosen_by if chosen_by is not None else cells:
        if r["score_fn"] not in BASELINES:
            groups[(r["model"], r["task"])].append(r)
    auc = lambda r: -math.inf if math.isnan(r["auc"]) else r["auc"]  # noqa: E731
    top = lambda mine: min(mine, key=lambda r: (-r["within_1pt"], -auc(r), r["score_fn"]))  # noqa: E731
    return _chosen(groups, top, BEST, _keyed(cells) if chosen_by is not None else None)


def _protocol_notes(curves: dict[tuple, _Curve], notes: list[str]) -> None:
    """A task whose models were measured with other shots, metric or BOS rule (the chat template may differ)."""
    by_task: dict[str, dict[tuple, set]] = defaultdict(lambda: defaultdict(set))
    for (_, model, task), c in curves.items():
        shots, metric, _, bos, *_ = c.protocol
        by_task[task][(shots, metric, bos)].add(model)
    for task, protocols in sorted(by_task.items()):
        if len(protocols) > 1:
            parts = [f"{s}-shot {m}, BOS {b}: {_listing(ms)}" for (s, m, b), ms in sorted(protocols.items(), key=str)]
            notes.append(f"{task}: models differ in protocol ({'; '.join(parts)}); compare them with care")


def _rendering_notes(curves: dict[tuple, _Curve], notes: list[str]) -> None:
    """Which rendering the chat-templated cells used, per task: lm-eval 0.4.5's (the paper's) or 0.4.13's; rows
    written before the rendering was recorded are 0.4.13's."""
    from dormant_tasks.evaluation.rendering import RENDERED_AS

    by_task: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for (_, model, task), c in curves.items():
        if c.protocol[_PROTOCOL.index("chat_template")]:
            rendering = c.protocol[_PROTOCOL.index("rendering")] or "lm-eval"
            by_task[task][RENDERED_AS.get(rendering, rendering)].add(model)
    for task, renderings in sorted(by_task.items()):
        parts = [f"{how}: {_listing(models)}" for how, models in sorted(renderings.items())]
        notes.append(f"{task}: chat-templated prompts rendered as {'; as '.join(parts)}")


def _order(r: dict) -> tuple:
    return (
        _AGGREGATE_RANK.get(r["score_fn"], 0),
        r["score_fn"],
        r["model"] == AVERAGE_MODEL,
        r["model"],
        r["task"] == AVERAGE_TASK,
        r["task"],
    )


# ---------------------------------------------------------------------------------------------- formats


def number_text(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def _never(r: dict) -> str | None:
    return NEVER_WITHIN if r.get("never_within") else WITHIN_THROUGHOUT if r.get("within_throughout") else None


def _zeros_in(r: dict) -> int:
    """How many curves that never crossed base - 1 point put their authors' 0 into the row's value: 1 for such
    a curve, the count behind an average or a difference (`zeros_in`)."""
    return 1 if _never(r) else int(r.get("zeros_in") or 0)


NO_CROSSING = "—"  # the interval of a curve that never crossed: its 0 is no crossing, so it has no interval
ZEROS_IN = "‡"  # after a mean or difference that holds the authors' 0 of a curve that never crossed
NO_CROSSING_NOTE = (
    f"{NO_CROSSING}: no interval, the curve never crossed base − 1 point (its value is no crossing, not 0 heads)"
)
ZEROS_IN_NOTE = f"{ZEROS_IN}: a mean or difference that counts a never-crossing curve as the authors' 0"


def interval_text(r: dict) -> str:
    """ "12.30 to 18.75"; NO_CROSSING for a curve that never crossed (its redraws give "0.00 to 0.00", which
    reads as a measured 0); "" when the row has no interval."""
    if r.get("low") is None or math.isnan(r["low"]):
        return ""
    if _never(r):
        return NO_CROSSING
    return f"{r['low']:.2f} to {r['high']:.2f}"


def value_text(r: dict) -> str:
    """A row's "% zeroed within 1 point" as every table shows it: the never-crossing words (`within_text`), else
    the value, marked ZEROS_IN when it holds a never-crossing curve's authors' 0 (a mean over models, a
    difference), and WARNED when its curve has a warning."""
    marked = ZEROS_IN if not _never(r) and _zeros_in(r) else ""
    return within_text(r["within_1pt"], _never(r)) + marked + (WARNED if r.get("warnings") else "")


def table_notes(rows: list[dict]) -> list[str]:
    """The footnotes of the marks the rows' cells carry (`interval_text`, `value_text`)."""
    notes = [NO_CROSSING_NOTE] if any(interval_text(r) == NO_CROSSING for r in rows) else []
    return notes + ([ZEROS_IN_NOTE] if any(ZEROS_IN in value_text(r) for r in rows) else [])


def _labels(rows: list[dict], intervals: bool = False) -> list[tuple[str, ...]]:
    """HEADER's cells of each row, as shown (markdown and LaTeX), with INTERVAL_HEADER's after the value."""
    n_total = len({r["model"] for r in rows if r["model"] != AVERAGE_MODEL})
    out: list[tuple[str, ...]] = []
    for r in rows:
        fn = r["score_fn"]
        if fn == BEST:  # named as such on every row, its Average too
            fn = "best of all functions"
        if fn in ("best of all functions", OURS) and r["best_fn"]:
            where = f", chosen on {r['chosen_on']}, reported on {r['reported_on']}" if r.get("chosen_on") else ""
            fn = f"{fn} ({r['best_fn']}{where})"
        model = r["model"]
        if model == AVERAGE_MODEL and r["n_models"] is not None and r["n_models"] < n_total:
            model = f"{AVERAGE_MODEL} ({r['n_models']} of {n_total} models)"
        within = value_text(r)
        extra = (interval_text(r), "" if r.get("n_items") is None else str(r["n_items"])) if intervals else ()
        out.append((fn, model, r["task"], within, *extra, number_text(r["auc"]), number_text(r["base_accuracy"])))
    return out


def _header(intervals: bool) -> tuple[str, ...]:
    return (*HEADER[:4], *(INTERVAL_HEADER if intervals else ()), *HEADER[4:])


_LATEX_SPECIAL = {c: f"\\{c}" for c in "&%$#_{}"} | {"~": r"\textasciitilde{}", "^": r"\^{}", "\\": r"\textbackslash{}"}


def _latex(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def format_leaderboard_table(rows: list[dict], fmt: str = "markdown") -> str:
    """The rows (of `Leaderboard.rows`) as a markdown table, CSV (every column, full precision, the fields of
    `CSV_COLUMNS`) or a LaTeX tabular; sorted by function, then model, then task."""
    if fmt not in LEADERBOARD_FORMATS:
        raise ConfigError(
            f"--format {fmt}: unknown{did_you_mean(fmt, LEADERBOARD_FORMATS)}; choose one of {', '.join(LEADERBOARD_FORMATS)}"
        )
    rows = sorted(rows, key=_order)
    intervals = any(interval_text(r) for r in rows)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if r.get(k) is None else r[k]) for k in CSV_COLUMNS} for r in rows)
        return buffer.getvalue().rstrip("\n")
    labels = _labels(rows, intervals)
    header = _header(intervals)
    method = sorted({r["interval"] for r in rows if r.get("interval")})
    caption = f"95% intervals: {'; '.join(method)} (docs/SCORES.md §6)" if method else None
    notes = table_notes(rows)
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|---|---|---|" + "---:|" * (len(header) - 3)]
        # html.escape: a model or task name is the user's, and a Markdown viewer renders raw HTML
        lines += [
            "| " + " | ".join(html.escape(c, quote=False).replace("|", "\\|") for c in row) + " |" for row in labels
        ]
        return "\n".join(lines + (["", caption] if caption else []) + [line for n in notes for line in ("", n)])
    columns = "lll" + "r" * (len(header) - 3)
    lines = [rf"\begin{{tabular}}{{{columns}}}", r"\hline", " & ".join(_latex(h) for h in header) + r" \\", r"\hline"]
    for i, (r, row) in enumerate(zip(rows, labels)):
        if i and r["score_fn"] != rows[i - 1]["score_fn"]:
            lines.append(r"\hline")
        lines.append(" & ".join(_latex(cell) for cell in row) + r" \\")
    lines.append(r"\hline")
    lines += [rf"\multicolumn{{{len(header)}}}{{l}}{{\footnotesize {_latex(n)}}} \\" for n in notes]  # the marks'
    lines.append(r"\end{tabular}")
    return "\n".join(lines + ([f"% {caption}"] if caption else []))
