"""The leaderboard across models, read from the store's `evaluations` (docs/LEADERBOARD.md, docs/SCORES.md §6).

One cell per (score function, model, task): the "% of heads zeroed within 1 point" of that function's dynamic
sweep, with its normalised AUC and base accuracy, in %; around the cells the across-task `average`, the `Average`
over models and the aggregates (`leaderboard_aggregates`). Which rows make a cell:
- `mode` dynamic only, never a checkpoint the integrity audit set aside;
- one revision per model: `revision` when given, else `main`, else the model's latest evaluated checkpoint in
  training order (a note names every model not shown at `main`);
- one protocol per (model, task), the newest run's, and the newest run per function (`leaderboard_curves`).
With `resampling` each value gets a paired-bootstrap interval over the stored items, and with `select_on` the
aggregates choose their function on one half of the items and report it on the other (`intervals`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.checkpoints import MAIN, parse_revision_name, series_sort_key
from dormant_tasks.errors import ConfigError, StoreError, did_you_mean
from dormant_tasks.evaluation.intervals import HALVES, ItemResampling, chosen_elsewhere, items_behind
from dormant_tasks.evaluation.leaderboard_aggregates import best_rows, model_averages, ours_minus_awft, ours_rows
from dormant_tasks.evaluation.leaderboard_curves import (
    curve_row,
    names_text,
    newest_curves,
    protocol_notes,
    rendering_notes,
    task_averages,
)
from dormant_tasks.evaluation.leaderboard_rows import LeaderboardRow, row_order
from dormant_tasks.statistics import bootstrap_interval
from dormant_tasks.store import Table, read_table

_READ = [
    *("model_id", "revision", "stage", "step", "tokens", "task", "shots", "mode", "score_fn", "quantile"),
    *("frac_zeroed", "accuracy", "base_accuracy", "metric", "chat_template", "bos", "request_id", "evaluated_at"),
    *("rendering", "precision", "threshold_source", "n_items", "chance", "warnings"),
]
_ITEM_COLUMNS = ["model_id", "revision", "task", "score_fn", "quantile", "doc_id", "correct", "request_id"]
SAME_ITEMS = (
    "ours and best of all functions: each chosen and reported on the same items, as the authors did, so they read "
    "high (the largest of many noisy values; benchmarks/leaderboard_intervals.py); `--select-on even` chooses on "
    "the even items and reports on the odd ones"
)


@dataclass(frozen=True)
class Leaderboard:
    rows: list[LeaderboardRow]  # cells, averages and best functions, sorted (`row_order`); values in %
    revisions: dict[str, str]  # model -> the revision it is shown at
    notes: tuple[str, ...]  # what was left out or differs, one line each
    warnings: tuple[str, ...] = ()  # "model task function: warning" of every shown curve that has one
    interval: str | None = None  # the method of the rows' `low`/`high` (`intervals.method_text`), None: none drawn
    selection: str = ""  # on which items "ours" and "best" chose their function and reported its value


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
    evaluations = read_table(store, Table.evaluations)
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
        items = read_table(store, Table.evaluation_items, columns=_ITEM_COLUMNS).to_pylist()
    return build_leaderboard(
        evaluations,
        models=models,
        tasks=tasks,
        revision=revision,
        items=items,
        resampling=resampling,
        select_on=select_on,
        set_aside=set_aside_revisions(store),
    )


def set_aside_revisions(store) -> dict[tuple[str, str], str]:
    """{(model, revision): why} of every checkpoint the integrity audit set aside (and no run kept): a copy of
    another step is no checkpoint of its own, so its evaluations (a store may hold some from before the audit)
    are not ranked."""
    from dormant_tasks.tracking import set_aside_label

    rows = read_table(store, Table.set_aside_checkpoints).to_pylist()
    return {(r["model_id"], r["revision"]): set_aside_label(r) for r in rows if not r["kept"]}


def _without_set_aside(rows: list[dict], set_aside: dict[tuple[str, str], str], notes: list[str]) -> list[dict]:
    """`rows` less those of a set-aside checkpoint, each such checkpoint named in one note."""
    dropped = sorted({(r["model_id"], r["revision"]) for r in rows} & set(set_aside))
    notes += [f"{m}@{rev} left out: {set_aside[(m, rev)]} (set aside by the integrity audit)" for m, rev in dropped]
    return [r for r in rows if (r["model_id"], r["revision"]) not in set_aside]


def _rows(evaluations: pa.Table) -> list[dict]:
    t = evaluations.select(_READ)
    t = t.set_column(_READ.index("evaluated_at"), "evaluated_at", t.column("evaluated_at").cast(pa.int64()))
    return t.filter(pc.equal(t.column("mode"), "dynamic")).to_pylist()


def _selected_rows(evaluations: pa.Table, models, tasks) -> list[dict]:
    """The dynamic rows of the models and tasks asked for (all when None); ConfigError naming one the store does
    not have."""
    known_models = set(evaluations.column("model_id").to_pylist())
    rows = _rows(evaluations)
    swept = {r["model_id"] for r in rows}
    for m in models or ():
        if m not in known_models:
            raise ConfigError(
                f"--model {m}: no evaluations of it{did_you_mean(m, known_models)}; evaluated: {names_text(known_models)}"
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
                    f"--tasks {t}: no dynamic sweep of it{did_you_mean(t, known_tasks)}; swept: {names_text(known_tasks)}"
                )
        rows = [r for r in rows if r["task"] in set(tasks)]
    return rows


def build_leaderboard(
    evaluations: pa.Table,
    models=None,
    tasks=None,
    revision: str | None = None,
    *,
    items: list[dict] | None = None,
    resampling: ItemResampling | None = None,
    select_on: str | None = None,
    set_aside: dict[tuple[str, str], str] | None = None,
) -> Leaderboard:
    """The leaderboard of an `evaluations` table (its schema: `store.SCHEMAS["evaluations"]`); `items`, the
    `evaluation_items` rows behind it, for the intervals (`resampling`) and `select_on`; the rows of a
    `set_aside` checkpoint ({(model, revision): why}, `set_aside_revisions`) are left out, with a note."""
    if select_on is not None and select_on not in HALVES:
        raise ConfigError(f"--select-on {select_on}: choose {' or '.join(HALVES)} (the halves of the items)")
    notes: list[str] = []
    rows = _without_set_aside(_selected_rows(evaluations, models, tasks), set_aside or {}, notes)
    by_model: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_model[r["model_id"]].append(r)
    for m in dict.fromkeys(models or ()):
        if m not in by_model and tasks:  # swept, but not on these tasks (else: only at set-aside checkpoints)
            notes.append(f"{m} left out: no dynamic sweep of {', '.join(tasks)}")
    revisions = _choose_revisions(by_model, revision, explicit=bool(models), notes=notes)
    curves = newest_curves({m: [r for r in by_model[m] if r["revision"] == rev] for m, rev in revisions.items()}, notes)
    found, weights = items_behind(curves, rows, items, resampling, notes)
    samples = {key: c.accuracies(weights) for key, c in found.items()} if weights else {}
    cells = [curve_row(key, revisions[key[1]], c, samples.get(key)) for key, c in curves.items()]
    cells += task_averages(curves, revisions, notes, samples)
    if select_on is None:
        ours, best, others = ours_rows(cells), best_rows(cells), cells
        selection = SAME_ITEMS
    else:
        ours, best, others = chosen_elsewhere(curves, found, weights, revisions, select_on, notes)
        report_on = HALVES[1 - HALVES.index(select_on)]
        selection = (
            f"ours and best of all functions: each chosen on the {select_on} items and its value reported on the "
            f"{report_on} ones (--select-on {select_on}; halves by cluster, WinoGrande's twins together)"
        )
    differences = ours_minus_awft(ours, others)
    out = [*cells, *model_averages(cells)]
    for aggregate in (ours, differences, best):
        out += aggregate + model_averages(aggregate)
    protocol_notes(curves, notes)
    rendering_notes(curves, notes)
    warnings = tuple(f"{m} {task} {fn}: {w}" for (fn, m, task), c in sorted(curves.items()) for w in c.warnings)
    interval = resampling.method if resampling is not None and weights else None
    shown = sorted((_with_interval(r, interval) for r in out), key=row_order)
    return Leaderboard(shown, revisions, tuple(notes), warnings, interval, selection)


def _with_interval(r: LeaderboardRow, method: str | None) -> LeaderboardRow:
    """The row as shown: its 95% interval from its redrawn values (none without them), which it no longer carries."""
    low, high = bootstrap_interval(r.samples) if r.samples is not None else (None, None)
    return replace(r, low=low, high=high, interval=method if low is not None else None, samples=None)


def _revision_key(r: dict) -> tuple:
    parsed = parse_revision_name(r["revision"])
    ingredient = parsed.ingredient if parsed is not None else None
    return series_sort_key(r["revision"], r["stage"], ingredient, r["step"], r["tokens"])


def _choose_revisions(by_model: dict, revision: str | None, explicit: bool, notes: list[str]) -> dict[str, str]:
    """model -> the revision it is shown at: `revision` when given (a model without it left out, or refused when
    named), else `main`, else its latest evaluated checkpoint in training order."""
    if revision is not None:
        return _at_revision(by_model, revision, explicit, notes)
    out = {}
    for m in sorted(by_model):
        latest = max(by_model[m], key=_revision_key)["revision"]
        out[m] = latest
        if latest != MAIN:
            notes.append(f"{m} is shown at {latest}: no `main` evaluation, its latest evaluated checkpoint")
    return out


def _at_revision(by_model: dict, revision: str, explicit: bool, notes: list[str]) -> dict[str, str]:
    missing = sorted(m for m, rows in by_model.items() if not any(r["revision"] == revision for r in rows))
    if missing and explicit:
        raise ConfigError(
            f"--revision {revision}: {missing[0]} has no dynamic sweep of it; "
            f"its revisions: {names_text({r['revision'] for r in by_model[missing[0]]})}"
        )
    if len(missing) == len(by_model):
        known = {r["revision"] for rows in by_model.values() for r in rows}
        raise ConfigError(
            f"--revision {revision}: no model has a dynamic sweep of it{did_you_mean(revision, known)}; "
            f"swept: {names_text(known)}"
        )
    if missing:
        notes.append(f"left out, not evaluated at {revision}: {names_text(missing)}")
    return {m: revision for m in sorted(by_model) if m not in missing}
