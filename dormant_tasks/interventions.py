"""Interventions against the store: sweep or static-mask a checkpoint, write `evaluations`, print the leaderboard.

The science (WinoGrande log-likelihoods, zeroing, the sweep, the metric) is in `evaluation`; this module
decides which checkpoint and which heads, and writes the rows (docs/DATA_CONTRACT.md `evaluations`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .checkpoints import UNKNOWN, Revision, is_local_source, parse_revision_name
from .errors import CheckpointError, StoreError, did_you_mean
from .evaluation import (
    chance_note,
    evaluate_static,
    item_step_note,
    normalised_auc,
    pct_zeroed_within_1pt,
    run_sweep,
)
from .hub import check_repo_id
from .loading import load_model_at
from .requests import EvalRequest, Mode, model_id_for
from .series import SeriesView
from .store import read_table, write_request, write_table
from .tracker import common_columns


@dataclass(frozen=True)
class Target:
    """The checkpoint an evaluation runs on: where to load it from, and how its rows are labelled."""

    path_or_repo: str  # what from_pretrained loads
    load_revision: str | None  # the Hub revision to load (None: the folder itself / the default branch)
    model_id: str
    revision: Revision


def single_target(model: str, revision: str | None = None) -> Target:
    """`--model PATH_OR_REPO [--revision R]`. A local checkpoint folder named like a branch (inside a series
    folder) is labelled with its series, so its rows join the tracker's in reports."""
    if is_local_source(model):
        folder = Path(model).expanduser().resolve()
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
    model_id = model_id_for(source)
    if not SeriesView.exists(store, model_id):
        known = sorted(set(read_table(store, "taus").column("model_id").to_pylist()))
        raise StoreError(
            f"no tracked checkpoints of {model_id!r} in {store}{did_you_mean(model_id, known)}; "
            "run `dormant track` first (evaluate --series uses the tracker's masks)"
        )
    view = SeriesView.open(store, model_id)
    targets = []
    for name in view.revisions:
        rev = view.revision(name)
        if is_local_source(source):
            targets.append(Target(str(Path(source).expanduser().resolve() / rev.name), None, model_id, rev))
        else:
            targets.append(Target(source, rev.name, model_id, rev))
    return targets


def request_targets(request: EvalRequest) -> list[Target]:
    if request.series:
        return series_targets(request.store, request.model)
    return [single_target(request.model, request.revision)]


def evaluate_target(request: EvalRequest, target: Target, progress: bool = True) -> list[dict]:
    """Evaluate one checkpoint (the dynamic sweep, or the static tracker masks) and append its `evaluations`."""
    masks = {}
    if request.mode is Mode.STATIC:
        view = (
            SeriesView.open(request.store, target.model_id)
            if SeriesView.exists(request.store, target.model_id)
            else None
        )
        if view is None:
            raise StoreError(
                f"{target.model_id}: --mode static zeroes the tracker's mask, and the store "
                f"{request.store} has no tracked series {target.model_id!r}; run `dormant track` "
                "first, or use --mode dynamic"
            )
        masks = {fn: view.mask(target.revision.name, fn) for fn in request.score_fns}
    model, tokenizer = load_model_at(target.path_or_repo, target.load_revision, request.dtype, request.device)
    common = common_columns(target.model_id, target.revision)
    if request.mode is Mode.DYNAMIC:
        sweep = run_sweep(
            model,
            tokenizer,
            request.score_fns,
            task=request.task,
            shots=request.shots,
            limit=request.limit,
            batch_size=request.batch_size,
            quantiles=request.quantiles,
            progress=progress,
        )
        rows = list(sweep.rows)  # each row carries the un-intervened base accuracy
    else:
        rows, base_pct = [], None
        for fn, (heads, tau) in masks.items():
            row = evaluate_static(
                model,
                tokenizer,
                heads,
                score_fn=fn,
                tau=tau,
                task=request.task,
                shots=request.shots,
                limit=request.limit,
                batch_size=request.batch_size,
                base_accuracy=base_pct,
                progress=progress,
            )
            base_pct = 100.0 * row["base_accuracy"]
            rows.append(row)
    rows = [{**common, **r, "code_version": __version__, "request_id": request.request_id} for r in rows]
    write_request(request.store, target.model_id, request)
    write_table(
        request.store, "evaluations", rows, file_key=f"{target.revision.name}-{request.mode}-{request.request_id}"
    )
    return rows


def leaderboard(rows: list[dict]) -> list[dict]:
    """Per function: % of heads zeroed within 1 point, normalised AUC, base accuracy (dynamic sweeps);
    % zeroed and accuracy of the mask (static). Stored fractions are shown as percentages."""
    out = []
    for fn in dict.fromkeys(r["score_fn"] for r in rows):
        mine = [r for r in rows if r["score_fn"] == fn]
        base = mine[0]["base_accuracy"]
        if mine[0]["mode"] == "dynamic":
            points = [(100.0 * r["frac_zeroed"], 100.0 * r["accuracy"]) for r in mine]
            out.append(
                {
                    "score_fn": fn,
                    "within_1pt": pct_zeroed_within_1pt(points, 100.0 * base),
                    "auc": normalised_auc(points),
                    "base_accuracy": 100.0 * base,
                }
            )
        else:
            out.append(
                {
                    "score_fn": fn,
                    "pct_zeroed": 100.0 * mine[0]["frac_zeroed"],
                    "accuracy": 100.0 * mine[0]["accuracy"],
                    "base_accuracy": 100.0 * base,
                }
            )
    return out


def format_leaderboard(target: Target, rows: list[dict]) -> str:
    board = leaderboard(rows)
    head = f"{target.model_id}@{target.revision.name}: {rows[0]['task']}, {rows[0]['shots']}-shot, {rows[0]['n_items']} items"
    if not board:
        return head
    if "within_1pt" in board[0]:
        lines = [f"{'function':<10} {'% zeroed within 1 pt':>21} {'AUC':>8} {'base acc':>9}"]
        lines += [
            f"{b['score_fn']:<10} {b['within_1pt']:>21.2f} {b['auc']:>8.2f} {b['base_accuracy']:>9.2f}"
            for b in sorted(board, key=lambda b: -b["within_1pt"])
        ]
    else:
        lines = [f"{'function':<10} {'% zeroed (mask)':>16} {'accuracy':>9} {'base acc':>9}"]
        lines += [
            f"{b['score_fn']:<10} {b['pct_zeroed']:>16.2f} {b['accuracy']:>9.2f} {b['base_accuracy']:>9.2f}"
            for b in board
        ]
    # One un-intervened pass per checkpoint: every row carries the same base accuracy.
    lines.append(item_step_note(rows[0]["n_items"]))
    chance = chance_note(rows[0]["task"], rows[0]["n_items"], board[0]["base_accuracy"])
    if chance:
        lines.append(f"warning: {chance}")
    return "\n".join([head, *lines])
