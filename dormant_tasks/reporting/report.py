"""The evolution report of a series: how dormant heads appear, disappear and move (figures + HTML).

Each figure's DATA is computed here by a small function on a `Series` (checked exactly by tests);
`figures.py` only draws (the matplotlib figures and the HTML page). `render_report` writes index.html
(opens offline: no CDN, images referenced relatively), every figure as PNG (slides) and SVG (papers),
and summary.md into a temp folder that replaces the destination only when complete, so a failed
render never leaves a partial report. Score bands use head_scores' per-head means, not input_scores.

The series is what the store says: head states come from `head_scores.dormant`, transitions from the
`transitions` table (so stage-2 ingredient branches keep the predecessors the tracker gave them).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.engine.score_functions import ALL_IDS, get_score_function
from dormant_tasks.errors import ReportError, did_you_mean
from dormant_tasks.evaluation.metric import AUC_UNIT, WARNED, curve_warnings, normalised_auc, pct_zeroed_within_1pt
from dormant_tasks.evaluation.sweep import protocol_line
from dormant_tasks.outputs import Owner, check_folder, publish_folder, report_folder, staging_folder
from dormant_tasks.reporting import comparisons, page
from dormant_tasks.reporting import figures as fg
from dormant_tasks.store.io import list_models, open_store, read_table
from dormant_tasks.store.layout import series_files
from dormant_tasks.text import plural
from dormant_tasks.tracking import findings
from dormant_tasks.tracking.agreement import AGREEMENT_TABLE, set_agreement
from dormant_tasks.tracking.defaults import FDR
from dormant_tasks.tracking.failures import failed_checkpoints
from dormant_tasks.tracking.findings import DEFAULT_RESAMPLING, Estimate, Findings, Resampling, Share
from dormant_tasks.tracking.series import SeriesView, open_views
from dormant_tasks.tracking.tau_positions import TauPosition
from dormant_tasks.tracking.tau_positions import tau_positions as positions_of
from dormant_tasks.tracking.transitions import confident_at
from dormant_tasks.version import __version__

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_SCORE_FN = "ahon_ln"


@dataclass(frozen=True)
class Series:
    """One model's analysed checkpoints in series order, with every head's state per score function."""

    model_id: str
    checkpoints: list[dict]  # the `checkpoints` rows used, one per revision, in series order
    n_layers: int
    n_heads: int
    score_fns: tuple[str, ...]  # tracked functions, in the paper's order
    taus: dict[str, tuple[float, str]]  # score_fn -> (tau, direction)
    dormant: np.ndarray  # int8 [fn, layer*n_heads+head, checkpoint]: 1 dormant, 0 active, -1 not scored
    score: np.ndarray  # float64 [fn, layer*n_heads+head, checkpoint]: the mean score (NaN if not scored)
    marks: np.ndarray  # int8 [fn, layer*n_heads+head, checkpoint]: +1 fell dormant into it, -1 woke, 0 none
    confident: np.ndarray  # bool [fn, layer*n_heads+head, checkpoint]: the transition into it is confident
    blips: np.ndarray  # bool [fn, layer*n_heads+head, checkpoint]: the transition into it is a blip (undone next)
    tau_sources: list[dict]  # `taus` rows of the series' taus_id (may be empty)
    evaluations: list[dict]  # `evaluations` rows of the model (may be empty)
    failed: tuple[dict, ...] = ()  # `failed_checkpoints` rows: checkpoints not stored (a rerun retries them)

    @property
    def revisions(self) -> list[str]:
        return [c["revision"] for c in self.checkpoints]

    @property
    def tokens(self) -> np.ndarray:
        return np.array([c["tokens"] for c in self.checkpoints], dtype=np.int64)  # [checkpoint]

    def fn_index(self, score_fn: str) -> int:
        if score_fn not in self.score_fns:
            get_score_function(score_fn)  # an id that does not exist at all: ConfigError with did-you-mean
            raise ReportError(
                f"score function {score_fn!r} was not tracked for {self.model_id}; "
                f"choose from: {', '.join(self.score_fns)}"
            )
        return self.score_fns.index(score_fn)


def resolve_model_id(store, model_id: str | None) -> str:
    """The model to report on: the given one (must be in the store) or the store's only model."""
    models = list_models(open_store(store))
    if not models:
        raise ReportError(f"the store {store} holds no analysed checkpoints; run `dormant track` first")
    if model_id is None:
        if len(models) > 1:
            raise ReportError(f"the store holds {len(models)} models; pick one with --model: {', '.join(models)}")
        return models[0]
    if model_id not in models:
        raise ReportError(
            f"model {model_id!r} is not in the store{did_you_mean(model_id, models)}; it holds: {', '.join(models)}"
        )
    return model_id


def load_series(store, model_id: str | None, fdr: float = FDR, calibration_id: str | None = None) -> Series:
    """One model's current series (`SeriesView`) on its primary calibration set, or on `calibration_id`;
    ReportError when the store cannot give a consistent one. A transition is confident when its BH q-value is
    below `fdr` (`transitions.confident_at`)."""
    root = open_store(store)
    model_id = resolve_model_id(root, model_id)
    if not SeriesView.exists(root, model_id):
        raise ReportError(
            f"{model_id} has no tracked checkpoints in the store (evaluations only?); run `dormant track` for it"
        )
    view = SeriesView.open(root, model_id, calibration_id)
    checkpoints = list(view.checkpoints)
    if not checkpoints:
        raise ReportError(
            f"{model_id} has no checkpoints under its current taus {view.taus_id}"
            f"{f' ({view.n_stale} under older ones)' if view.n_stale else ''}; "
            "run `dormant track --retau` on the whole series"
        )
    n_layers = max(int(c["n_layers"]) for c in checkpoints)
    n_heads = max(int(c["n_heads"]) for c in checkpoints)
    revisions = pa.array(view.revisions, pa.string())

    hs = view.head_scores()
    if hs.num_rows == 0:
        raise ReportError(
            f"the store has checkpoints but no `head_scores` for {model_id} (calibration {view.calibration_id}, "
            f"taus {view.taus_id}); the store is incomplete: run `dormant track` for it again"
        )
    present = set(hs["score_fn"].unique().to_pylist())
    score_fns = tuple(f for f in ALL_IDS if f in present) + tuple(sorted(present - set(ALL_IDS)))
    col = pc.index_in(hs["revision"], value_set=revisions).to_numpy()  # [row]
    fn = pc.index_in(hs["score_fn"], value_set=pa.array(score_fns)).to_numpy()  # [row]
    head = hs["layer"].to_numpy().astype(np.int64) * n_heads + hs["head_index"].to_numpy()  # [row]
    shape = (len(score_fns), n_layers * n_heads, len(checkpoints))
    dormant = np.full(shape, -1, dtype=np.int8)  # [fn, head, checkpoint]
    score = np.full(shape, np.nan)  # [fn, head, checkpoint]
    dormant[fn, head, col] = hs["dormant"].to_numpy(zero_copy_only=False).astype(np.int8)
    score[fn, head, col] = hs["score"].to_numpy(zero_copy_only=False)
    taus = {f: (view.taus[f].value, str(view.taus[f].direction)) for f in score_fns}

    marks, confident, blips = _transition_marks(view.transitions(score_fns), revisions, score_fns, n_heads, shape, fdr)
    changes = (np.diff(dormant.astype(np.int16), axis=2) != 0) & (dormant[:, :, 1:] >= 0) & (dormant[:, :, :-1] >= 0)
    if not marks.any() and changes.any():
        raise ReportError(
            f"the `transitions` table has no rows for {model_id} although its head states change; "
            "run `dormant track` again to derive them"
        )
    tau_rows = [r for r in read_table(root, "taus", model_id).to_pylist() if r["taus_id"] == view.taus_id]
    evaluations = read_table(root, "evaluations", model_id).to_pylist()
    return Series(
        model_id,
        checkpoints,
        n_layers,
        n_heads,
        score_fns,
        taus,
        dormant,
        score,
        marks,
        confident,
        blips,
        tau_rows,
        evaluations,
        tuple(failed_checkpoints(root, model_id)),
    )


def _transition_marks(tr: pa.Table, revisions, score_fns, n_heads, shape, fdr: float = FDR) -> tuple[np.ndarray, ...]:
    """+1 / -1 at (fn, head, checkpoint the change lands in) for the series' current transitions, and where
    those transitions are confident and where they are blips (null in either, from older files: False)."""
    marks = np.zeros(shape, dtype=np.int8)  # [fn, head, checkpoint]
    confident, blips = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)  # [fn, head, checkpoint]
    if tr.num_rows == 0:
        return marks, confident, blips
    fn = pc.index_in(tr["score_fn"], value_set=pa.array(score_fns)).to_numpy()  # [row]
    col = pc.index_in(tr["to_revision"], value_set=revisions).to_numpy()  # [row]
    head = tr["layer"].to_numpy().astype(np.int64) * n_heads + tr["head_index"].to_numpy()  # [row]
    kind = np.where(pc.equal(tr["to_state"], "dormant").to_numpy(zero_copy_only=False), 1, -1).astype(np.int8)
    marks[fn, head, col] = kind
    confident[fn, head, col] = confident_at(tr, fdr)
    blips[fn, head, col] = pc.fill_null(tr["blip"], False).to_numpy(zero_copy_only=False).astype(bool)
    return marks, confident, blips


# ---------------------------------------------------------------- figure data (checked exactly by tests)


@dataclass(frozen=True)
class RasterData:
    row_labels: list[str]  # "L{layer}.H{head}", grouped by layer
    columns: list[str]  # revisions in series order
    states: np.ndarray  # int8 [head, checkpoint]: 1 dormant, 0 active, -1 not scored
    marks: np.ndarray  # int8 [head, checkpoint]: +1 fell dormant here, -1 woke here, 0 no change


def raster_data(series: Series, score_fn: str, hide_blips: bool = False) -> RasterData:
    """The raster of one function; with `hide_blips`, blips undone (`states_without_blips`)."""
    i = series.fn_index(score_fn)
    labels = [f"L{layer}.H{head}" for layer in range(series.n_layers) for head in range(series.n_heads)]
    if hide_blips:
        states, marks = states_without_blips(series, score_fn)
        return RasterData(labels, series.revisions, states, marks)
    return RasterData(labels, series.revisions, series.dormant[i], series.marks[i])


def states_without_blips(series: Series, score_fn: str) -> tuple[np.ndarray, np.ndarray]:
    """The head states [head, checkpoint] with every blip undone, and their marks [head, checkpoint].

    A blip is A -> B into checkpoint c undone after c (B -> A): the head is shown in its predecessor's
    shown state at c, that is A (in series order, so that a run of blips A B A B shows A A A B). The marks
    are the changes of the shown states between each checkpoint and its predecessor in the branch tree,
    among the checkpoints the function was scored on (as the transitions table compares them).
    """
    from dormant_tasks.tracking.transitions import predecessors

    i = series.fn_index(score_fn)
    states, blips = series.dormant[i].copy(), series.blips[i]  # [head, checkpoint]
    scored = np.flatnonzero((states >= 0).any(axis=0))  # [checkpoint] the function's checkpoints
    stage = np.array([series.checkpoints[c]["stage"] for c in scored], dtype=np.int64)
    ingredient = np.array([series.checkpoints[c].get("ingredient") or 0 for c in scored], dtype=np.int64)
    pred = predecessors(stage, ingredient)  # [scored checkpoint] index into `scored`
    marks = np.zeros_like(states)  # [head, checkpoint]
    for j in range(1, len(scored)):
        c, p = scored[j], scored[pred[j]]
        undo = blips[:, c] & (states[:, c] >= 0) & (states[:, p] >= 0)  # [head]
        states[undo, c] = states[undo, p]
        both = (states[:, c] >= 0) & (states[:, p] >= 0)
        marks[:, c] = np.where(both, states[:, c] - states[:, p], 0)
    return states, marks


def raw_quantile_fns(series: Series) -> frozenset[str]:
    """The raw-unit functions whose tau is a quantile of the reference checkpoint (`page.raw_quantile_note`)."""
    from dormant_tasks.tracking.masks import QUANTILE_DEFAULTS

    return frozenset(
        r["score_fn"] for r in series.tau_sources if r["source"] == "quantile" and r["score_fn"] in QUANTILE_DEFAULTS
    )


def dormant_percent(series: Series) -> np.ndarray:
    """% of scored heads that are dormant: float64 [fn, checkpoint] (NaN where nothing was scored)."""
    scored = (series.dormant >= 0).sum(axis=1)  # [fn, checkpoint]
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * (series.dormant == 1).sum(axis=1) / np.where(scored > 0, scored, np.nan)


def layer_counts(series: Series, score_fn: str) -> np.ndarray:
    """Number of dormant heads per layer: int64 [layer, checkpoint]."""
    states = series.dormant[series.fn_index(score_fn)]  # [head, checkpoint]
    return (states == 1).reshape(series.n_layers, series.n_heads, -1).sum(axis=1)


@dataclass(frozen=True)
class TransitionCounts:
    to_revisions: list[str]  # the later checkpoint of each interval (series order, first checkpoint excluded)
    fell: np.ndarray  # int64 [interval]: heads that fell dormant (active -> dormant)
    woke: np.ndarray  # int64 [interval]: heads that woke (dormant -> active)


def transition_counts(series: Series, score_fn: str) -> TransitionCounts:
    marks = series.marks[series.fn_index(score_fn)][:, 1:]  # [head, interval]
    return TransitionCounts(series.revisions[1:], (marks == 1).sum(axis=0), (marks == -1).sum(axis=0))


def score_bands(series: Series, score_fn: str) -> np.ndarray:
    """10th percentile, median and 90th percentile of the per-head mean scores: float64 [3, checkpoint]."""
    scores = series.score[series.fn_index(score_fn)]  # [head, checkpoint]
    out = np.full((3, scores.shape[1]), np.nan)
    ok = ~np.isnan(scores).all(axis=0)
    out[:, ok] = np.nanquantile(scores[:, ok], [0.1, 0.5, 0.9], axis=0)
    return out


def agreement_iou(series: Series, checkpoint: int = -1) -> np.ndarray:
    """IoU of the dormant head sets of every pair of functions at one checkpoint: float64 [fn, fn].

    NaN where both sets are empty (the overlap of two empty sets is undefined, not 1 or 0).
    """
    sets = (series.dormant[:, :, checkpoint] == 1).astype(np.int64)  # [fn, head]
    inter = sets @ sets.T  # [fn, fn]
    sizes = sets.sum(axis=1)  # [fn]
    union = sizes[:, None] + sizes[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), np.nan)


# ---------------------------------------------------------------- where each tau sits


def tau_positions(store, series: Series) -> list[TauPosition]:
    """Per tracked function, where its tau sits at the series' reference checkpoint, with its warning
    (`tracking.tau_positions`: the same lines `dormant track` prints)."""
    return positions_of(SeriesView.open(store, series.model_id))


# ---------------------------------------------------------------- calibration sets


@dataclass(frozen=True)
class CalibrationSets:
    """The "Calibration sets" section of the report of a series tracked on several sets, for one function.

    Each set's masks are its current ones (its own `SeriesView`); the pairs' Jaccard indices are the
    `calibration_agreement` table's (computed here, not stored, when a store has no agreement file yet).
    """

    score_fn: str
    calibration_ids: list[str]  # the series' sets, the primary first
    revisions: list[str]  # checkpoints scored under score_fn on >= 2 sets, in series order
    tokens: np.ndarray  # int64 [checkpoint]
    jaccard: dict[tuple[str, str], np.ndarray]  # (set a, set b) -> float64 [checkpoint] (NaN: not both scored)
    states: np.ndarray  # int8 [layer*n_heads+head, checkpoint]: SET_ALL, SET_SOME, SET_NONE or -1 (< 2 sets scored)
    set_rows: list[dict]  # per set: its checkpoints, % dormant at its last one, transitions under score_fn (and
    # of them confident ones and blips, `transition_tally`)
    last_jaccard: dict[tuple[str, str], tuple[str, float]]  # pair -> (its last checkpoint, mean Jaccard over functions)


SET_NONE, SET_SOME, SET_ALL = 0, 1, 2  # CalibrationSets.states: dormant on no set, some of them, every one


def calibration_sets(views, series: Series, score_fn: str) -> CalibrationSets | None:
    """The section's data from the series' `open_views`; None with fewer than 2 calibration sets (no section)."""
    if len(views) < 2:
        return None
    root = views[0].store
    table = read_table(root, AGREEMENT_TABLE, series.model_id)
    if table.num_rows == 0:  # tracked before the agreement existed: computed, not stored
        table = set_agreement(root, series.model_id)
    ids = [v.calibration_id for v in views]
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1 :]]
    rows = table.to_pylist()
    mine = [r for r in rows if r["score_fn"] == score_fn]
    revisions = list(dict.fromkeys(r["revision"] for r in mine))  # the table is in series order
    tokens = {r["revision"]: r["tokens"] for r in mine}
    col = {rev: j for j, rev in enumerate(revisions)}
    jaccard = {p: np.full(len(revisions), np.nan) for p in pairs}
    for r in mine:
        jaccard[(r["calibration_a"], r["calibration_b"])][col[r["revision"]]] = r["jaccard"]
    last_jaccard = {}
    for p in pairs:
        of_pair = [r for r in rows if (r["calibration_a"], r["calibration_b"]) == p]
        if of_pair:
            last = of_pair[-1]["revision"]
            values = np.array([r["jaccard"] for r in of_pair if r["revision"] == last], dtype=np.float64)
            # NaN (both masks empty: undefined) is left out; all NaN: no function marks a head on either set
            last_jaccard[p] = (last, float(np.nanmean(values)) if (~np.isnan(values)).any() else float("nan"))
    n_cells = series.n_layers * series.n_heads
    scored = np.zeros((n_cells, len(revisions)), dtype=np.int64)  # [head, checkpoint]: sets that scored it
    dormant = np.zeros((n_cells, len(revisions)), dtype=np.int64)  # [head, checkpoint]: sets it is dormant on
    set_rows = []
    for view in views:
        fns = [score_fn] if score_fn in view.taus else []
        tracked = set(view.revisions)
        here = [rev for rev in revisions if rev in tracked]
        if fns and here:
            hs = view.head_scores(fns, here, columns=["revision", "layer", "head_index", "dormant"])
            c = np.array([col[rev] for rev in hs.column("revision").to_pylist()], dtype=np.int64)
            h = hs.column("layer").to_numpy().astype(np.int64) * series.n_heads + hs.column("head_index").to_numpy()
            scored[h, c] += 1
            dormant[h, c] += hs.column("dormant").to_numpy(zero_copy_only=False).astype(np.int64)
        set_rows.append(_set_row(view, fns, series.n_heads, n_cells))
    states = np.where(dormant == scored, SET_ALL, np.where(dormant > 0, SET_SOME, SET_NONE)).astype(np.int8)
    states[scored < 2] = -1
    return CalibrationSets(
        score_fn,
        ids,
        revisions,
        np.array([tokens[rev] for rev in revisions], dtype=np.int64),
        jaccard,
        states,
        set_rows,
        last_jaccard,
    )


def _set_row(view: SeriesView, fns: list[str], n_heads: int, n_cells: int) -> dict:
    """One set's line of the section's table: its last checkpoint's % dormant and its transitions, counted as
    the summary counts the primary set's (`_transition_marks`, then `transition_tally`)."""
    last = view.revisions[-1] if view.revisions else None
    pct, tally = None, transition_tally(np.zeros(0, np.int8), np.zeros(0, bool), np.zeros(0, bool))
    if fns and last is not None:
        d = view.head_scores(fns, [last], columns=["dormant"]).column("dormant").to_numpy(zero_copy_only=False)
        pct = round(100.0 * float(np.mean(d)), 2) if d.size else None
        revisions = pa.array(view.revisions, pa.string())
        shape = (len(fns), n_cells, len(view.revisions))  # [fn, head, checkpoint]
        tally = transition_tally(*_transition_marks(view.transitions(fns), revisions, tuple(fns), n_heads, shape))
    return {
        "calibration_id": view.calibration_id,
        "n_checkpoints": len(view.revisions),
        "last_revision": last,
        "final_pct_dormant": pct,
        **tally,
    }


@dataclass
class LengthDependence:
    """The heads whose dormant rate differs most between calibration sets, at the last checkpoint all sets
    scored, with each set's `length_slope` (score change per doubling of the input length) for them."""

    score_fn: str
    revision: str
    sets: list[str]
    heads: list[str]  # "L{layer}.H{head}", most different first
    slope: np.ndarray  # float64 [set, head] (NaN: lengths did not vary, or re-aggregated)
    rate: np.ndarray  # float64 [set, head] dormant_rate


def length_dependence(views, series: Series, score_fn: str, top: int = 8) -> LengthDependence | None:
    """From the series' `open_views`; None when fewer than 2 sets share a checkpoint scored under `score_fn`."""
    views = [v for v in views if score_fn in v.taus]
    if len(views) < 2:
        return None
    shared = [r for r in views[0].revisions if all(r in v.revisions for v in views[1:])]
    if not shared:
        return None
    last, keys = shared[-1], [("layer", "ascending"), ("head_index", "ascending")]
    cols = ["layer", "head_index", "dormant_rate", "length_slope"]
    tables = [v.head_scores([score_fn], [last], columns=cols).sort_by(keys) for v in views]
    if len({t.num_rows for t in tables}) != 1 or tables[0].num_rows == 0:
        return None
    rate = np.stack([t.column("dormant_rate").to_numpy(zero_copy_only=False) for t in tables])  # [set, head]
    slope = np.stack([t.column("length_slope").fill_null(np.nan).to_numpy(zero_copy_only=False) for t in tables])
    order = np.argsort(-(rate.max(axis=0) - rate.min(axis=0)), kind="stable")[:top]
    layer, head = tables[0].column("layer").to_numpy(), tables[0].column("head_index").to_numpy()
    labels = [f"L{layer[i]}.H{head[i]}" for i in order]
    return LengthDependence(score_fn, last, [v.calibration_id for v in views], labels, slope[:, order], rate[:, order])


def calibration_sets_line(sets: CalibrationSets) -> str:
    """summary.md's line: per pair of sets, the mean Jaccard (over score functions) at its last checkpoint."""
    last = {rev for rev, _ in sets.last_jaccard.values()}
    one = len(last) == 1  # the usual case: every pair's last shared checkpoint is the series' last
    parts = [
        f"{a} vs {b} {'undefined' if np.isnan(j) else f'{j:.2f}'}{'' if one else f' ({rev})'}"
        for (a, b), (rev, j) in sets.last_jaccard.items()
    ]
    at = f" ({next(iter(last))})" if one else ""
    return (
        f"Calibration sets ({len(sets.calibration_ids)}): mean Jaccard of the dormant masks at the last checkpoint"
        f"{at}, over the score functions both sets track and that mark a head on either (undefined when both "
        f"masks are empty): {'; '.join(parts) or 'no checkpoint shared'}."
    )


def calibration_sets_table(sets: CalibrationSets) -> list[str]:
    """summary.md's table of the sets: per set its checkpoints, % dormant at its last one and its transitions
    under the report's function, with the confident ones and the blips (the summary above is the primary set's)."""
    fn = sets.score_fn
    lines = [
        f"| calibration set | checkpoints | last checkpoint | % dormant there ({fn}) | fell dormant | woke "
        "| confident | blips |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in sets.set_rows:
        pct = "not tracked" if r["final_pct_dormant"] is None else f"{r['final_pct_dormant']:.2f}"
        lines.append(
            f"| {r['calibration_id']} | {r['n_checkpoints']} | {r['last_revision'] or ''} | {pct} | "
            f"{r['fell_dormant']} | {r['woke']} | {r['confident']} | {r['blips']} |"
        )
    return lines


@dataclass(frozen=True)
class EvaluationGroup:
    """One threshold sweep: the dynamic-mode points of each function for one (revision, task, shots)."""

    revision: str
    task: str
    shots: int
    base_accuracy: float
    n_items: int
    curves: dict[str, np.ndarray]  # score_fn -> [point, 2] (% zeroed, accuracy), sorted by % zeroed
    within_1pt: dict[str, float]  # score_fn -> % of heads zeroed within 1 point (docs/SCORES.md §6)
    auc: dict[str, float]  # score_fn -> normalised AUC (the mean accuracy over the swept range, in %)
    protocol: str = ""  # shots, metric, chat template, BOS rule, data and few-shot source (evaluation.protocol_line)
    warnings: dict[str, list[str]] = field(default_factory=dict)  # score_fn -> its curve's (evaluations.warnings)

    def warning_lines(self) -> list[str]:
        """One line per distinct warning, naming the functions it concerns (a chance-level base: all of them)."""
        by_text: dict[str, list[str]] = {}
        for fn, found in self.warnings.items():
            for w in found:
                by_text.setdefault(w, []).append(fn)
        return [f"{', '.join(fns)}: {w}" if len(fns) < len(self.curves) else w for w, fns in by_text.items()]


def evaluation_groups(series: Series) -> list[EvaluationGroup]:
    groups: dict[tuple, dict[str, list]] = {}
    chance: dict[tuple, float | None] = {}
    for row in series.evaluations:
        if row["mode"] == "dynamic":
            key = (row["revision"], row["task"], row["shots"], row["base_accuracy"], row["n_items"], protocol_line(row))
            groups.setdefault(key, {}).setdefault(row["score_fn"], []).append(
                (100.0 * row["frac_zeroed"], 100.0 * row["accuracy"])
            )  # stored fractions, shown in %
            chance[key] = row.get("chance")
    order = {rev: i for i, rev in enumerate(series.revisions)}
    out = []
    ordered = sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], -1), kv[0][1:3]))  # series order, task
    for key, by_fn in ordered:
        revision, task, shots, base, n_items, protocol = key
        base = 100.0 * base
        fns = sorted(by_fn, key=lambda f: ALL_IDS.index(f) if f in ALL_IDS else len(ALL_IDS))
        curves = {f: np.array(sorted(by_fn[f])) for f in fns}  # [point, 2]
        within = {f: pct_zeroed_within_1pt(curves[f], base) for f in fns}
        out.append(
            EvaluationGroup(
                revision,
                task,
                shots,
                base,
                n_items,
                curves,
                within,
                {f: normalised_auc(curves[f]) for f in fns},
                protocol,
                {f: curve_warnings(task, n_items, chance[key], curves[f], base) for f in fns},
            )
        )
    return out


# ---------------------------------------------------------------- summaries (also the track flow's artifacts)


def summary_rows(series: Series) -> list[dict]:
    """One row per score function: first checkpoint with a dormant head, final % dormant, transitions (of
    which `confident` and `blips` count those the intervals are sure of and those undone at once)."""
    pct = dormant_percent(series)  # [fn, checkpoint]
    rows = []
    for i, fn in enumerate(series.score_fns):
        any_dormant = np.flatnonzero((series.dormant[i] == 1).any(axis=0))  # [checkpoint]
        first = series.checkpoints[any_dormant[0]] if any_dormant.size else None
        marks = series.marks[i]  # [head, checkpoint]
        tau, direction = series.taus[fn]
        rows.append(
            {
                "score_fn": fn,
                "tau": tau,
                "direction": direction,
                "first_dormant_revision": first["revision"] if first else None,
                "first_dormant_tokens": int(first["tokens"]) if first else None,
                "final_pct_dormant": round(float(pct[i, -1]), 2),
                **transition_tally(marks, series.confident[i], series.blips[i]),
                "heads_ever_changed": int((marks != 0).any(axis=1).sum()),
            }
        )
    return rows


def transition_tally(marks: np.ndarray, confident: np.ndarray, blips: np.ndarray) -> dict[str, int]:
    """The transitions in `marks` (+1 fell dormant, -1 woke, 0 none; any shape, e.g. [head, checkpoint]):
    fell_dormant, woke, and of them the `confident` ones and the `blips` (same-shaped bool arrays, as
    `_transition_marks` gives). The counts of `summary_rows` (primary set) and of each calibration set's row."""
    changed = marks != 0
    return {
        "fell_dormant": int((marks == 1).sum()),
        "woke": int((marks == -1).sum()),
        "confident": int((confident & changed).sum()),
        "blips": int((blips & changed).sum()),
    }


def report_markdown(
    series: Series, sets: CalibrationSets | None = None, found: Findings | None = None, positions=()
) -> str:
    """The keyed markdown summary of a series (summary.md, and the track flow's Prefect artifact); with `sets`
    (several calibration sets), a line of their agreement and a table of each set's transitions; with `found`,
    the findings (`findings_lines`); with `positions` (`tau_positions`), where each tau sits."""
    t = series.tokens
    lines = [
        f"# Dormant heads: {series.model_id}",
        "",
        f"{len(t)} checkpoint(s) from {series.revisions[0]} ({fg.format_tokens(t[0])} tokens) to "
        f"{series.revisions[-1]} ({fg.format_tokens(t[-1])} tokens); {series.n_layers} layers x "
        f"{series.n_heads} heads; calibration set {series.checkpoints[0]['calibration_id']}; "
        f"taus {series.checkpoints[0]['taus_id']}.",
        "",
        "| score function | tau | first checkpoint with a dormant head | final % dormant | fell dormant | woke "
        "| confident | blips | heads that changed state |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary_rows(series):
        lines.append(
            f"| {r['score_fn']} | {r['direction']} {r['tau']:g} | {page.first_dormant_label(r)} | "
            f"{r['final_pct_dormant']:.2f} | "
            f"{r['fell_dormant']} | {r['woke']} | {r['confident']} | {r['blips']} | {r['heads_ever_changed']} |"
        )
    note = page.raw_quantile_note(series.tau_sources)
    if note:
        lines += ["", f"Note: {note}"]
    if series.failed:
        lines += ["", f"{page.failed_note(series.failed)}:", ""]
        lines += [f"- {r['revision']}: {r['reason']}" for r in series.failed]
    if positions:
        lines += [
            "",
            "Where each tau sits at the reference checkpoint: share of (input, head) pairs it marks inactive "
            "(quantile of tau among the per-input scores).",
            "",
            "| score function | reference checkpoint | marks | quantile of tau |",
            "|---|---|---:|---:|",
        ]
        for p in positions:
            if p.share is None:
                lines.append(f"| {p.score_fn} | {p.reference_revision} | not scored there | |")
            else:
                lines.append(f"| {p.score_fn} | {p.reference_revision} | {100 * p.share:.1f}% | {p.quantile:.3f} |")
        lines += [f"Warning: {p.warning}." for p in positions if p.warning]
    if found is not None:
        lines += ["", "## Findings", "", *findings_lines(found)]
    if sets is not None:
        lines += ["", calibration_sets_line(sets), "", *calibration_sets_table(sets)]
    for g in evaluation_groups(series):
        lines += [
            "",
            f"## {g.task}, {g.shots}-shot, {g.revision}: % of heads zeroed within 1 point "
            f"(base accuracy {g.base_accuracy:.2f}%, {g.n_items} items)",
            "",
            f"Protocol: {g.protocol}.",
            "",
            f"| score function | % zeroed within 1 point | normalised AUC ({AUC_UNIT}) |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {f} | {g.within_1pt[f]:.2f}{WARNED if g.warnings.get(f) else ''} | {g.auc[f]:.2f} |" for f in g.curves
        ]
        lines += [f"Warning (!): {w}." for w in g.warning_lines()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- findings (docs/SCORES.md §7)


def _pct(share: Share | None) -> str:
    if share is None or not share.n:
        return "undefined (0 of 0)"
    return f"{share.k} of {share.n} ({100 * share.value:.1f}%, 95% CI {100 * share.low:.1f}-{100 * share.high:.1f}%)"


def _tokens(t: float) -> str:
    return fg.format_tokens(t)


def _num(x: float) -> str:
    """A count-like number to three significant digits, never in scientific notation (6,840, 12.3, 0.0412)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ci(e: Estimate, fmt=_num, unit: str = "") -> str:
    """The value, its unit and "(95% CI low-high)" ("low to high" when an end is negative); or "undefined"."""
    if math.isnan(e.value):
        return "undefined"
    dash = " to " if min(e.low, e.high) < 0 else "-"
    ci = "no interval" if math.isnan(e.low) else f"95% CI {fmt(e.low)}{dash}{fmt(e.high)}"
    return f"{fmt(e.value)}{unit} ({ci})"


def _frac(x: float) -> str:
    return f"{100 * x:.1f}%"


def _settled_list(e, most: int = 20) -> str:
    """Per final-dormant head, where it settled (dormant at >= STABLE from then on), earliest first."""
    order = np.argsort(e.settled_tokens, kind="stable")
    parts = [f"{e.heads[i]} at {_tokens(e.settled_tokens[i])}" for i in order[:most]]
    return ", ".join(parts) + (f", and {len(order) - most} more" if len(order) > most else "")


def _interval_list(t, most: int = 12) -> str:
    """Each compared interval's changes with its checkpoint spacing (the first `most` of them)."""
    parts = [
        f"to {_tokens(t.interval_tokens[i])} (spacing {_tokens(t.interval_spacing[i])} tokens, {t.interval_steps[i]} "
        f"steps): {t.interval_confident[i]} confident of {t.interval_confident[i] + t.interval_other[i]}"
        for i in range(min(most, len(t.interval_tokens)))
    ]
    more = len(t.interval_tokens) - most
    return "; ".join(parts) + (f"; and {more} more intervals" if more > 0 else "")


def findings_lines(f: Findings) -> list[str]:
    """The three findings as markdown paragraphs (`dormant findings`, summary.md, the report)."""
    e, t, d, r = f.emergence, f.transitions, f.input_dependence, f.resampling
    out = [
        f"Findings for {f.model_id} under {f.score_fn} (dormant if score {f.direction} {f.tau:g}), calibration set "
        f"{f.calibration_id}, {f.n_checkpoints} checkpoints to {e.final_revision} ({_tokens(e.final_tokens)} tokens).",
        "",
    ]
    stable = f"dormant at >= {100 * e.stable:.0f}% of the checkpoints from then on"
    if e.early.n:
        emerge = (
            f"of the {e.early.n} heads dormant at the last checkpoint, the median head was first dormant at "
            f"{_ci(e.first_median, _tokens, ' tokens')}, {_ci(e.first_fraction, _frac, ' of the series')}, and "
            f"{stable} from {_ci(e.settled_median, _tokens, ' tokens')}, "
            f"{_ci(e.settled_fraction, _frac, ' of the series')}; "
            f"{_pct(e.early)} were so by {int(100 * findings.EARLY)}% of the tokens ({_tokens(e.early_tokens)}); "
            f"per head: {_settled_list(e)}."
        )
    else:
        emerge = "no head is dormant at the last checkpoint, so there is no emergence to date."
    first = (
        f"first dormant head at {e.first_dormant_revision} ({_tokens(e.first_dormant_tokens or 0)} tokens)"
        if e.first_dormant_revision
        else "no head is ever dormant"
    )
    out += [
        f"1. **Emergence.** Dormant {e.pct_dormant_first:.1f}% -> {e.pct_dormant_last:.1f}% of {e.n_heads} heads; "
        f"{first}; {emerge}",
        "",
    ]
    stage_parts = [
        f"stage {g.stage}: {g.n_transitions} transitions, {g.n_confident} confident over {_tokens(g.tokens)} tokens "
        f"= {_ci(g.per_billion)} per billion tokens (exact Poisson, as if independent: "
        f"{_num(g.poisson.low)}-{_num(g.poisson.high)}); checkpoint spacing {_tokens(g.spacing.value)} tokens "
        f"(median; {_tokens(g.spacing.low)}-{_tokens(g.spacing.high)})"
        if g.tokens > 0
        else f"stage {g.stage}: {g.n_transitions} transitions, {g.n_confident} confident (no token span)"
        for g in t.stages
    ]
    out += [
        f"2. **Transitions.** {plural(t.n_transitions, 'transition')} ({t.fell_dormant} fell dormant, {t.woke} woke), "
        f"{t.n_confident} confident ({t.correction}; {t.n_raw} of the {t.n_paired} tested have uncorrected "
        f"p < {t.fdr:g}), {plural(t.n_blips, 'blip')}. Heads that ever changed state: {_pct(t.ever_changed)}; more than "
        f"once: {_pct(t.more_than_once)}; with two or more confident transitions: {t.confidently_more_than_once}. "
        f"{'; '.join(stage_parts) or 'A single checkpoint: none yet'}. A rate per token depends on how densely "
        "the checkpoints are spaced (denser checkpoints see more short-lived changes): compare series by the "
        f"shares of heads. Per interval: {_interval_list(t) or 'none'}.",
        "",
    ]
    if d.measured:
        first_j = "undefined throughout" if d.first is None else f"{d.first[1]:.2f} at {d.first[0]}"
        last_j = _ci(d.last, lambda x: f"{x:.2f}") if d.last is not None else "undefined"
        if d.noise_floor is not None:
            nf = d.noise_floor
            two = lambda x: f"{x:+.2f}"  # noqa: E731
            floor = (
                f"Noise floor at {nf.revision} (random halves of {nf.n_inputs} inputs, {nf.repeats} splits): "
                f"within a set {_ci(nf.within, lambda x: f'{x:.2f}')}, across sets {_ci(nf.across, lambda x: f'{x:.2f}')}; "
                f"across minus within {_ci(nf.difference, two)}, permutation p = {nf.p_value:.3g} "
                f"({nf.permutations} permutations of the set labels; one-sided, across lower)."
            )
        else:
            floor = f"Noise floor: not measured ({d.noise_floor_note})."
        out.append(
            f"3. **Input dependence.** {len(d.calibration_ids)} calibration sets; Jaccard of their masks (pooled "
            f"over pairs): first defined {first_j}; at the last shared checkpoint {d.revisions[-1]}: {last_j}; "
            f"heads dormant on every set, of those dormant on any: {_pct(d.all_of_any)}. {floor}"
        )
    else:
        out.append(
            f"3. **Input dependence.** Not measured: the series is tracked on {len(d.calibration_ids)} calibration "
            "set(s); add another with `dormant track SERIES --calibration winogrande --calibration wikipedia "
            "--retau` (or any `--calibration FILE`)."
        )
    out += [
        "",
        f"Intervals: 95%; over heads by {r.method}, or Wilson with the heads as trials. They say how a number "
        "varies over heads like these of this one model: heads are not independent trials, and nothing here "
        "speaks for other models or seeds (docs/SCORES.md §7).",
    ]
    return out


def findings_plots(f: Findings) -> list[tuple[str, str, Callable[[], Figure]]]:
    """(kind, file name, draw) of the findings' figures: emergence, transitions and, when measured, the
    calibration sets' agreement through training."""
    plots: list[tuple[str, str, Callable[[], Figure]]] = [
        ("findings_emergence", "findings_emergence", lambda: fg.draw_emergence(f.emergence)),
        (
            "findings_transitions",
            "findings_transitions",
            lambda: fg.draw_confident_transitions(f.transitions, f.score_fn),
        ),
    ]
    d = f.input_dependence
    if d.measured:  # the report's one set_agreement figure (the same data: `calibration_sets`), drawn once
        plots.append(("set_agreement", "set_agreement", lambda: fg.draw_set_agreement(d.tokens, d.pairs, f.score_fn)))
    return plots


@dataclass(frozen=True)
class FindingsResult:
    out_dir: Path
    summary_md: Path  # findings.md
    figures: dict[str, tuple[Path, Path]]  # figure name -> (PNG, SVG)


def write_findings(f: Findings, out_dir, store) -> FindingsResult:
    """findings.md and the findings' figures into `out_dir`, replaced only when complete, and only a folder that
    is new, empty or this store's findings of this series (`outputs.check_folder`, as a report)."""
    out = Path(out_dir)
    owner = Owner.of("findings", store, f.model_id)
    check_folder(out, owner)
    tmp = staging_folder(out)
    try:
        (tmp / "figures").mkdir()
        drawn = {name: fg.save_figure(draw(), tmp / "figures", name) for _, name, draw in findings_plots(f)}
        text = "\n".join([f"# Findings: {f.model_id}", "", *findings_lines(f)]) + "\n"
        (tmp / "findings.md").write_text(text, encoding="utf-8")
        publish_folder(tmp, out, owner)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    figures = {n: (out / "figures" / p.name, out / "figures" / s.name) for n, (p, s) in drawn.items()}
    return FindingsResult(out, out / "findings.md", figures)


# ---------------------------------------------------------------- rendering


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    index_html: Path
    figures: dict[str, tuple[Path, Path]]  # figure name -> (PNG, SVG)
    summary_md: Path
    summary_rows: list[dict]
    markdown: str  # the text of summary.md


def render_report(
    store,
    model_id: str | None = None,
    out_dir=None,
    score_fn: str | None = None,
    progress: bool = False,
    reuse: bool = False,
    hide_blips: bool = False,
    fdr: float = FDR,
    resampling: Resampling = DEFAULT_RESAMPLING,
) -> ReportResult:
    """Render the evolution report of `model_id` (the store's only model when None) into `out_dir`.

    `score_fn` is the function of the per-function figures (raster, layers, transitions, scores):
    ahon_ln when tracked, else the first tracked one. `out_dir` defaults to
    <$DORMANT_REPORTS or ./reports under the working directory>/<series slug>/.
    The folder is replaced only when the new report is complete, and only when it is new, empty or this store's
    report of this series (`outputs.check_folder`: anything else is a ConfigError before any figure is drawn). With `reuse` (what `dormant track` asks),
    a report rendered from the same store files by the same dormant-heads is returned as it is.
    With `hide_blips` the raster shows every blip undone (`states_without_blips`); the rest is the same.
    `fdr`: the false discovery rate of a confident transition; `resampling`: the findings' intervals over heads.
    """
    if reuse:
        root = open_store(store)
        model_id = resolve_model_id(root, model_id)
        out = report_folder(model_id, out_dir)
        check_folder(out, Owner.of("report", store, model_id))
        stamp = inputs_stamp(root, model_id, score_fn, hide_blips, fdr, resampling, out)
        done = _reusable(out, stamp)
        if done is not None:
            return done
    series = load_series(store, model_id, fdr)
    fn = score_fn or (DEFAULT_SCORE_FN if DEFAULT_SCORE_FN in series.score_fns else series.score_fns[0])
    series.fn_index(fn)
    out = report_folder(series.model_id, out_dir)
    owner = Owner.of("report", store, series.model_id)
    check_folder(out, owner)  # before the figures are drawn
    stamp = inputs_stamp(open_store(store), series.model_id, score_fn, hide_blips, fdr, resampling, out)
    linked = comparisons.comparisons_of(series.model_id, out)  # `dormant compare` pages that include the series
    t, tau, L, H = series.tokens, series.taus[fn][0], series.n_layers, series.n_heads
    plots: list[tuple[str, str, Callable[[], Figure]]] = [  # (kind, file name, draw)
        (
            "dormant_percent",
            "dormant_percent",
            lambda: fg.draw_dormant_percent(t, dormant_percent(series), series.score_fns, raw_quantile_fns(series)),
        ),
        (
            "raster",
            f"raster_{fn}",
            lambda: fg.draw_raster(raster_data(series, fn, hide_blips), t, L, H, fn, tau, hide_blips),
        ),
        ("layers", f"layers_{fn}", lambda: fg.draw_layer_counts(layer_counts(series, fn), t, H, fn)),
    ]
    if len(t) > 1:
        plots.append(
            (
                "transitions",
                f"transitions_{fn}",
                lambda: fg.draw_transition_bars(transition_counts(series, fn), t[1:], fn),
            )
        )
    plots += [
        ("scores", f"scores_{fn}", lambda: fg.draw_score_bands(t, score_bands(series, fn), tau, fn)),
        (
            "agreement",
            "agreement",
            lambda: fg.draw_agreement(agreement_iou(series), series.score_fns, series.revisions[-1]),
        ),
    ]
    views = open_views(open_store(store), series.model_id)  # every calibration set, read once for the section
    sets = calibration_sets(views, series, fn)
    if sets is not None and sets.revisions:
        plots += [
            ("set_agreement", "set_agreement", lambda: fg.draw_set_agreement(sets.tokens, sets.jaccard, fn)),
            (
                "set_raster",
                "set_raster",
                lambda: fg.draw_set_raster(sets.states, sets.tokens, L, H, fn, len(sets.calibration_ids)),
            ),
        ]
        lengths = length_dependence(views, series, fn)
        if lengths is not None:
            plots.append(("set_length", "set_length", lambda: fg.draw_set_length(lengths)))
    found = findings.series_findings(store, series.model_id, fn, fdr, resampling)
    plots += [p for p in findings_plots(found) if p[1] not in {name for _, name, _ in plots}]
    positions = tau_positions(open_store(store), series)
    groups = evaluation_groups(series)
    for k, g in enumerate(groups):
        title = f"{g.task}, {g.shots}-shot, {g.revision} ({g.n_items} items)"
        plots.append(
            (
                f"accuracy_vs_zeroed_{k}",
                f"accuracy_vs_zeroed_{k}",
                functools.partial(fg.draw_accuracy_vs_zeroed, g.curves, g.base_accuracy, title),
            )
        )

    tmp = staging_folder(out)
    try:
        (tmp / "figures").mkdir()
        drawn = {}
        for _, name, draw in _progress(plots, progress):
            drawn[name] = fg.save_figure(draw(), tmp / "figures", name)
        markdown = report_markdown(series, sets, found, positions)
        (tmp / "summary.md").write_text(markdown, encoding="utf-8")
        fig = {kind: name for kind, name, _ in plots}
        html = page.report_html(series, fn, fig, summary_rows(series), groups, sets, found, positions, linked)
        (tmp / "index.html").write_text(html, encoding="utf-8")
        rows = summary_rows(series)
        (tmp / STAMP).write_text(json.dumps({"inputs": stamp, "summary_rows": rows}, default=str), encoding="utf-8")
        publish_folder(tmp, out, owner)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    figures = {n: (out / "figures" / p.name, out / "figures" / s.name) for n, (p, s) in drawn.items()}
    return ReportResult(out, out / "index.html", figures, out / "summary.md", rows, markdown)


STAMP = "inputs.json"  # what a report was rendered from (`inputs_stamp`), and its summary rows


def inputs_stamp(
    root: Path,
    model_id: str,
    score_fn: str | None,
    hide_blips: bool = False,
    fdr: float = FDR,
    resampling: Resampling = DEFAULT_RESAMPLING,
    out: Path | None = None,
) -> str:
    """A digest of everything a report reads: the name, size and modification time of each of the series'
    files in the tables it reads, the score function asked for (and `hide_blips`, `fdr`, `resampling` when
    not the defaults), the dormant-heads version and, with `out`, the comparisons beside it that it links to."""
    asked = f"{score_fn}\0hide_blips" if hide_blips else f"{score_fn}"  # the default's stamps stay as they were
    if fdr != FDR or resampling != DEFAULT_RESAMPLING:
        asked += f"\0fdr={fdr}\0{resampling}"
    h = hashlib.sha256(f"{__version__}\0{asked}\n".encode())
    if out is not None and (linked := comparisons.comparisons_of(model_id, out)):
        h.update(json.dumps(linked).encode())
    for table in (
        "checkpoints",
        "head_scores",
        "transitions",
        "head_histories",
        "taus",
        "evaluations",
        "calibration_agreement",
        "failed_checkpoints",
    ):
        for p in series_files(root, table, model_id):
            st = p.stat()
            h.update(f"{table}/{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _reusable(out: Path, stamp: str) -> ReportResult | None:
    try:
        saved = json.loads((out / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if saved.get("inputs") != stamp or not (out / "index.html").is_file():
        return None
    figures = {p.stem: (p, p.with_suffix(".svg")) for p in sorted((out / "figures").glob("*.png"))}
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    return ReportResult(out, out / "index.html", figures, out / "summary.md", saved["summary_rows"], markdown)


def _progress(items, enabled: bool):
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc="figures", unit="figure", disable=None)  # None: on a terminal only
