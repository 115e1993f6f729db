"""Interventions against the store: which checkpoint and which heads, the sweep or static mask run on them, the
`evaluations` rows written, and the checkpoint's leaderboard printed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dormant_tasks.checkpoints import (
    UNKNOWN,
    Revision,
    check_repo_id,
    load_model_at,
    parse_revision_name,
    source_for,
)
from dormant_tasks.errors import CheckpointError, StoreError, did_you_mean
from dormant_tasks.evaluation.authors import authors_taus
from dormant_tasks.evaluation.lm_tasks import check_task_names
from dormant_tasks.evaluation.metric import (
    AUC_UNIT,
    AVERAGE_TASK,
    chance_note,
    never_crossed,
    normalised_auc,
    pct_zeroed_within_1pt,
    recovery_note,
    task_average_curve,
    within_text,
)
from dormant_tasks.evaluation.precision import check_int8_backend, precision_for, precision_label
from dormant_tasks.evaluation.request import EvalRequest, Mode
from dormant_tasks.evaluation.sweep import (
    evaluate_static,
    item_step_note,
    prepare,
    protocol_line,
    run_sweep,
)
from dormant_tasks.store import Table, check_store, read_table, series_name_of, write_request, write_table
from dormant_tasks.tracking import SeriesView, common_columns
from dormant_tasks.version import __version__

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """The checkpoint an evaluation runs on: where to load it from, and how its rows are labelled."""

    source: str  # what from_pretrained loads: a checkpoint folder or a Hub repo id (`dormant_tasks.names`)
    load_revision: str | None  # the Hub revision to load (None: the folder itself / the default branch)
    model_id: str
    revision: Revision


def single_target(model: str, revision: str | None = None) -> Target:
    """`--model PATH_OR_REPO [--revision R]`. A local checkpoint folder named like a branch (inside a series
    folder) is labelled with its series, so its rows join the tracker's in reports."""
    source = source_for(model)
    if source.folder is not None:  # one checkpoint folder, read in place
        folder = Path(source.spec)
        if not (folder / "config.json").is_file():
            what = "does not exist" if not folder.exists() else "has no config.json"
            raise CheckpointError(
                f"--model {model}: {folder} {what}; point it at a checkpoint folder "
                "(config.json, tokenizer, safetensors) or a Hub repo id"
            )
        parsed = parse_revision_name(folder.name)
        if parsed is not None and revision is None:
            return Target(str(folder), None, folder.parent.name, parsed)
        return Target(str(folder), revision, folder.name, _label(revision or "local"))
    check_repo_id(model)
    return Target(model, revision, model, _label(revision or "main"))


def _label(name: str) -> Revision:
    return parse_revision_name(name) or Revision(name, UNKNOWN, UNKNOWN, UNKNOWN)


def series_targets(store, source: str) -> list[Target]:
    """Every current checkpoint of a tracked series, in series order (for `--series`)."""
    origin = source_for(source)
    model_id = series_name_of(store, origin.identity, origin.name)  # its --series-name
    if not SeriesView.exists(store, model_id):
        known = sorted(set(read_table(store, Table.taus).column("model_id").to_pylist()))
        raise StoreError(
            f"no tracked checkpoints of {model_id!r} in {store}{did_you_mean(model_id, known)}; "
            "run `dormant track --model ...` first (evaluate --series uses the tracker's masks)"
        )
    view = SeriesView.open(store, model_id)
    # each loaded as its source finds it by name (`CheckpointSource.checkpoint`: a folder's subfolder, a Hub branch)
    return [Target(origin.spec, name, model_id, view.revision(name)) for name in view.revisions]


def check_request(request: EvalRequest, targets: Sequence[Target]) -> None:
    """What a request's targets need, checked before any model is loaded or row written: a tracked series
    (`--mode static` zeroes its masks; `--series` targets come from one), the authors' thresholds cover them
    (`--thresholds authors`), 8-bit weights can be loaded (`--precision paper`)."""
    for target in targets:
        if request.mode is Mode.STATIC and not request.series and not SeriesView.exists(request.store, target.model_id):
            raise StoreError(
                f"{target.model_id}: --mode static zeroes the tracker's mask, and the store "
                f"{request.store} has no tracked series {target.model_id!r}; run `dormant track --model {target.model_id}` "
                "first, or use --mode dynamic"
            )
        authors_taus(target.model_id, request.tasks, request.score_fns, request.quantiles, request.thresholds)
    if any(precision_for(t.model_id, request.precision, request.dtype)[1] for t in targets):
        check_int8_backend(request.device)


def request_targets(request: EvalRequest) -> list[Target]:
    if request.series:
        return series_targets(request.store, request.model)
    return [single_target(request.model, request.revision)]


@dataclass(frozen=True)
class EvalTargets:
    """An evaluate run's request and its checkpoints, resolved and checked once (`resolve_targets`): what the
    evaluate flow runs, whether the CLI resolved them before Prefect started or the flow itself did."""

    request: EvalRequest
    targets: tuple[Target, ...]


def resolve_targets(request: EvalRequest) -> EvalTargets:
    """The checks of an evaluate run, before any model is loaded or row written: the task names are lm-eval's,
    the store takes files, the checkpoints (one, or every tracked one of `--series`) exist, and they have what
    `check_request` asks for."""
    check_task_names(request.tasks)
    check_store(request.store, "writes")
    targets = tuple(request_targets(request))
    check_request(request, targets)
    return EvalTargets(request, targets)


def evaluate_target(request: EvalRequest, target: Target, progress: bool = True, log=None) -> list[dict]:
    """Evaluate one checkpoint of `resolve_targets(request)` (the dynamic sweep, or the static tracker masks) on
    the request's lm-eval tasks and append its `evaluations` (and with --log-samples its `evaluation_items`);
    `log` gets the notes."""
    masks = {}
    if request.mode is Mode.STATIC:
        view = SeriesView.open(request.store, target.model_id)
        masks = {fn: view.mask(target.revision.name, fn) for fn in request.score_fns}
    fixed_taus = authors_taus(target.model_id, request.tasks, request.score_fns, request.quantiles, request.thresholds)
    dtype, int8 = precision_for(target.model_id, request.precision, request.dtype)
    model, tokenizer = load_model_at(target.source, target.load_revision, dtype, request.device, int8=int8)
    prepared = prepare(model, tokenizer, request, target.model_id)
    for note in prepared.notes:
        (log or _log).warning("%s", note)  # the console's level prefix says what it is (never "WARNING: note:")
    if request.mode is Mode.DYNAMIC:
        result = run_sweep(
            prepared,
            request.score_fns,
            quantiles=request.quantiles,
            log_samples=request.log_samples,
            progress=progress,
            fixed_taus=fixed_taus,
        )
    else:
        result = evaluate_static(prepared, masks, log_samples=request.log_samples, progress=progress)
    common = common_columns(target.model_id, target.revision)
    stamp = {
        "code_version": __version__,
        "request_id": request.request_id,
        "precision": precision_label(request.precision, dtype, int8, model),
    }
    now = datetime.now(UTC)  # one time per run
    rows = [{**common, **r, **stamp, "evaluated_at": now} for r in result.rows]
    file_key = f"{target.revision.name}-{request.mode}-{request.request_id}"
    write_request(request.store, target.model_id, request)
    if result.items:  # the per-item rows first: the `evaluations` rows mark the run complete
        items = [{**common, **item, "request_id": request.request_id} for item in result.items]
        write_table(request.store, Table.evaluation_items, items, file_key=file_key)
    write_table(request.store, Table.evaluations, rows, file_key=file_key)
    return rows


def _curves(rows: list[dict]) -> dict[str, dict[str, tuple]]:
    """task -> fn -> (quantiles, points in %, base %) of the dynamic rows, in the order they were written."""
    out: dict[str, dict[str, tuple]] = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        out[task] = {}
        for fn in dict.fromkeys(r["score_fn"] for r in rows if r["task"] == task):
            mine = [r for r in rows if r["task"] == task and r["score_fn"] == fn]
            points = tuple((100.0 * r["frac_zeroed"], 100.0 * r["accuracy"]) for r in mine)
            out[task][fn] = (tuple(r["quantile"] for r in mine), points, 100.0 * mine[0]["base_accuracy"])
    return out


def leaderboard(rows: list[dict]) -> dict[str, list[dict]]:
    """task (and "average" across >= 2 tasks) -> per function: % of heads zeroed within 1 point, normalised AUC,
    base accuracy (dynamic sweeps); % zeroed and accuracy of the mask (static). Stored fractions shown in %."""
    out: dict[str, list[dict]] = {}
    if rows and rows[0]["mode"] != "dynamic":
        for task in dict.fromkeys(r["task"] for r in rows):
            out[task] = [
                {
                    "score_fn": r["score_fn"],
                    "pct_zeroed": 100.0 * r["frac_zeroed"],
                    "accuracy": 100.0 * r["accuracy"],
                    "base_accuracy": 100.0 * r["base_accuracy"],
                }
                for r in rows
                if r["task"] == task
            ]
        return out
    curves = _curves(rows)
    for task, fns in curves.items():
        out[task] = [_entry(fn, points, base) for fn, (_, points, base) in fns.items()]
    if len(curves) > 1:
        out[AVERAGE_TASK] = [
            _entry(fn, *task_average_curve({t: fns[fn] for t, fns in curves.items() if fn in fns}))
            for fn in dict.fromkeys(fn for fns in curves.values() for fn in fns)
        ]
    return out


def _entry(fn: str, points, base: float) -> dict:
    """One function's line of a task's leaderboard, from its curve (points and base in %)."""
    return {
        "score_fn": fn,
        "within_1pt": pct_zeroed_within_1pt(points, base),
        "never": never_crossed(points, base),
        "auc": normalised_auc(points),
        "base_accuracy": base,
    }


def format_leaderboard(target: Target, rows: list[dict]) -> str:
    if not rows:
        return f"{target.model_id}@{target.revision.name}: no evaluations"
    board = leaderboard(rows)
    lines = [f"{target.model_id}@{target.revision.name}:"]
    for task, entries in board.items():
        mine = [r for r in rows if r["task"] == task]
        if task == AVERAGE_TASK:
            lines.append(f"average across {len(board) - 1} tasks (point by point at the same quantiles)")
        else:
            lines.append(f"{task}: {mine[0]['n_items']} items, {protocol_line(mine[0])}")
        if "within_1pt" in entries[0]:
            auc = f"AUC ({AUC_UNIT})"
            lines.append(f"  {'function':<10} {'% zeroed within 1 pt':>25} {auc:>20} {'base acc':>9}")
            lines += [
                f"  {b['score_fn']:<10} {within_text(b['within_1pt'], b['never']):>25} {b['auc']:>20.2f} "
                f"{b['base_accuracy']:>9.2f}"
                for b in sorted(entries, key=lambda b: -b["within_1pt"])
            ]
        else:
            lines.append(f"  {'function':<10} {'% zeroed (mask)':>16} {'accuracy':>9} {'base acc':>9}")
            lines += [
                f"  {b['score_fn']:<10} {b['pct_zeroed']:>16.2f} {b['accuracy']:>9.2f} {b['base_accuracy']:>9.2f}"
                for b in entries
            ]
        if task != AVERAGE_TASK:
            lines.append(f"  {item_step_note(mine[0]['n_items'])}")
            chance = chance_note(task, mine[0]["n_items"], entries[0]["base_accuracy"], mine[0].get("chance"))
            if chance:
                lines.append(f"  warning: {chance}")
            for b in entries:  # the curves that dip below base - 1 point and rise back (stored as `warnings`)
                points = [
                    (100.0 * r["frac_zeroed"], 100.0 * r["accuracy"]) for r in mine if r["score_fn"] == b["score_fn"]
                ]
                dip = recovery_note(points, b["base_accuracy"]) if "within_1pt" in b else None
                if dip:
                    lines.append(f"  warning: {b['score_fn']}: {dip}")
    return "\n".join(lines)
