"""Interventions against the store: sweep or static-mask a checkpoint, write `evaluations`, print the leaderboard.

The science (WinoGrande log-likelihoods, zeroing, the sweep, the metric) is in `evaluation`; this module
decides which checkpoint and which heads, and writes the rows (SPEC §8 `evaluations`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from . import __version__
from .checkpoints import UNKNOWN, Revision, is_local_source, parse_revision_name
from .errors import EvaluationError, StoreError, did_you_mean
from .evaluation import DEFAULT_QUANTILES, evaluate_static, normalised_auc, pct_zeroed_within_1pt, run_sweep
from .loading import load_model_at
from .store import read_table, write_table
from .tracker import common_columns, model_id_for

MODES = ("dynamic", "static")
DEFAULT_SCORES = ("ahon_ln", "lthon_ln", "awft")


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
        parsed = parse_revision_name(folder.name)
        if parsed is not None and revision is None:
            return Target(str(folder), None, folder.parent.name, parsed)
        return Target(str(folder), revision, folder.name, _label(revision or "local"))
    return Target(model, revision, model, _label(revision or "main"))


def _label(name: str) -> Revision:
    return parse_revision_name(name) or Revision(name, UNKNOWN, UNKNOWN, UNKNOWN)


def series_targets(store, source: str) -> list[Target]:
    """Every checkpoint of a tracked series, in training order (for `--series`)."""
    model_id = model_id_for(source)
    ckpts = read_table(store, "checkpoints", model_id=model_id)
    if ckpts.num_rows == 0:
        known = sorted(set(read_table(store, "checkpoints").column("model_id").to_pylist()))
        raise StoreError(f"no tracked checkpoints of {model_id!r} in {store}{did_you_mean(model_id, known)}; "
                         "run `dormant track` first (evaluate --series uses the tracker's masks)")
    seen, targets = set(), []
    for row in sorted(ckpts.to_pylist(), key=lambda r: (r["stage"], r["ingredient"] or 0, r["step"])):
        if row["revision"] in seen:
            continue
        seen.add(row["revision"])
        rev = Revision(row["revision"], row["stage"], row["step"], row["tokens"], row["ingredient"])
        if is_local_source(source):
            targets.append(Target(str(Path(source).expanduser().resolve() / rev.name), None, model_id, rev))
        else:
            targets.append(Target(source, rev.name, model_id, rev))
    return targets


def tracker_mask(store, target: Target, score_fn: str) -> tuple[frozenset[tuple[int, int]], float]:
    """The dormant (layer, head) set and tau of `score_fn` at a tracked checkpoint (latest taus of the series)."""
    taus = read_table(store, "taus", model_id=target.model_id)
    heads = read_table(store, "head_scores", model_id=target.model_id,
                       filters={"revision": target.revision.name, "score_fn": score_fn})
    if taus.num_rows:
        heads = heads.filter(pc.equal(heads.column("taus_id"), taus.column("taus_id")[0]))
    if heads.num_rows == 0:
        raise StoreError(f"{target.model_id}@{target.revision.name}: no tracked {score_fn} mask in {store}; "
                         f"run `dormant track` with --scores {score_fn} first, or use --mode dynamic")
    rows = heads.filter(heads.column("dormant")).to_pylist()
    return frozenset((r["layer"], r["head"]) for r in rows), float(heads.column("tau")[0].as_py())


def run_key(target: Target, **params) -> str:
    payload = json.dumps({"revision": target.revision.name, **params, "code": __version__}, sort_keys=True)
    return f"{target.revision.name}-{params['mode']}-{hashlib.sha256(payload.encode()).hexdigest()[:12]}"


def evaluate_target(store, target: Target, score_fns, mode: str = "dynamic", task: str = "winogrande",
                    shots: int = 0, limit: int | None = None, batch_size: int = 16, dtype: str = "float32",
                    device: str = "auto", quantiles: tuple[float, ...] | None = None,
                    progress: bool = True) -> list[dict]:
    """Evaluate one checkpoint (the dynamic sweep, or the static tracker masks) and append its `evaluations`."""
    if mode not in MODES:
        raise EvaluationError(f"unknown --mode {mode!r}{did_you_mean(mode, MODES)}; use dynamic or static")
    masks = {fn: tracker_mask(store, target, fn) for fn in score_fns} if mode == "static" else {}
    model, tokenizer = load_model_at(target.path_or_repo, target.load_revision, dtype, device)
    common = common_columns(target.model_id, target.revision)
    if mode == "dynamic":
        sweep = run_sweep(model, tokenizer, score_fns, task=task, shots=shots, limit=limit, batch_size=batch_size,
                          quantiles=quantiles or DEFAULT_QUANTILES, progress=progress)
        rows = list(sweep.rows)  # each row carries the un-intervened base accuracy
    else:
        rows, base_accuracy = [], None
        for fn, (heads, tau) in masks.items():
            row = evaluate_static(model, tokenizer, heads, score_fn=fn, tau=tau, task=task, shots=shots, limit=limit,
                                  batch_size=batch_size, base_accuracy=base_accuracy, progress=progress)
            base_accuracy = row["base_accuracy"]
            rows.append(row)
    rows = [{**common, **r, "code_version": __version__} for r in rows]
    key = run_key(target, mode=mode, task=task, shots=shots, limit=limit, scores=sorted(score_fns),
                  quantiles=list(quantiles or DEFAULT_QUANTILES))
    write_table(store, "evaluations", rows, file_key=key)
    return rows


def leaderboard(rows: list[dict]) -> list[dict]:
    """Per function: % of heads zeroed within 1 point, normalised AUC, base accuracy (dynamic sweeps);
    % zeroed and accuracy of the mask (static)."""
    out = []
    for fn in dict.fromkeys(r["score_fn"] for r in rows):
        mine = [r for r in rows if r["score_fn"] == fn]
        base = mine[0]["base_accuracy"]
        if mine[0]["mode"] == "dynamic":
            points = [(r["pct_zeroed"], r["accuracy"]) for r in mine]
            out.append({"score_fn": fn, "within_1pt": pct_zeroed_within_1pt(points, base),
                        "auc": normalised_auc(points), "base_accuracy": base})
        else:
            out.append({"score_fn": fn, "pct_zeroed": mine[0]["pct_zeroed"], "accuracy": mine[0]["accuracy"],
                        "base_accuracy": base})
    return out


def format_leaderboard(target: Target, rows: list[dict]) -> str:
    board = leaderboard(rows)
    head = f"{target.model_id}@{target.revision.name}: {rows[0]['task']}, {rows[0]['shots']}-shot, {rows[0]['n_items']} items"
    if not board:
        return head
    if "within_1pt" in board[0]:
        lines = [f"{'function':<10} {'% zeroed within 1 pt':>21} {'AUC':>8} {'base acc':>9}"]
        lines += [f"{b['score_fn']:<10} {b['within_1pt']:>21.2f} {b['auc']:>8.2f} {b['base_accuracy']:>9.2f}"
                  for b in sorted(board, key=lambda b: -b["within_1pt"])]
    else:
        lines = [f"{'function':<10} {'% zeroed (mask)':>16} {'accuracy':>9} {'base acc':>9}"]
        lines += [f"{b['score_fn']:<10} {b['pct_zeroed']:>16.2f} {b['accuracy']:>9.2f} {b['base_accuracy']:>9.2f}"
                  for b in board]
    return "\n".join([head, *lines])
