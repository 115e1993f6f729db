"""The data of each figure and table of a series' report, computed from a `series_data.Series` (checked exactly by
tests); `figures.py` only draws it. Score bands use head_scores' per-head means, not input_scores."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.checkpoints import format_tokens
from dormant_tasks.engine import ALL_IDS, ROLE_IDS
from dormant_tasks.evaluation import (
    curve_warnings,
    never_crossed,
    normalised_auc,
    pct_zeroed_within_1pt,
    protocol_line,
    within_text,
)
from dormant_tasks.reporting.series_data import ReportSeries
from dormant_tasks.tracking import SeriesView, TauPosition
from dormant_tasks.tracking import tau_positions as positions_of


@dataclass(frozen=True)
class RasterData:
    row_labels: list[str]  # "L{layer}.H{head}", grouped by layer
    columns: list[str]  # revisions in series order
    states: np.ndarray  # int8 [head, checkpoint]: 1 dormant, 0 active, -1 not scored
    marks: np.ndarray  # int8 [head, checkpoint]: +1 fell dormant here, -1 woke here, 0 no change


def raster_data(series: ReportSeries, score_fn: str, hide_blips: bool = False) -> RasterData:
    """The raster of one function; with `hide_blips`, blips undone (`states_without_blips`)."""
    i = series.fn_index(score_fn)
    labels = [f"L{layer}.H{head}" for layer in range(series.n_layers) for head in range(series.n_heads)]
    if hide_blips:
        states, marks = states_without_blips(series, score_fn)
        return RasterData(labels, series.revisions, states, marks)
    return RasterData(labels, series.revisions, series.dormant[i], series.marks[i])


def states_without_blips(series: ReportSeries, score_fn: str) -> tuple[np.ndarray, np.ndarray]:
    """The head states [head, checkpoint] with every blip undone, and their marks [head, checkpoint].

    A blip is A -> B into checkpoint c undone after c (B -> A): the head is shown in its predecessor's
    shown state at c, that is A (in series order, so that a run of blips A B A B shows A A A B). The marks
    are the changes of the shown states between each checkpoint and its predecessor in the branch tree,
    among the checkpoints the function was scored on (as the transitions table compares them).
    """
    from dormant_tasks.tracking import predecessors

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


def raw_quantile_fns(series: ReportSeries) -> frozenset[str]:
    """The raw-unit functions whose tau is a quantile of the reference checkpoint (`texts.raw_quantile_note`)."""
    from dormant_tasks.tracking import QUANTILE_DEFAULTS

    return frozenset(
        r["score_fn"] for r in series.tau_sources if r["source"] == "quantile" and r["score_fn"] in QUANTILE_DEFAULTS
    )


def dormant_percent(series: ReportSeries) -> np.ndarray:
    """% of scored heads that are dormant: float64 [fn, checkpoint] (NaN where nothing was scored)."""
    scored = (series.dormant >= 0).sum(axis=1)  # [fn, checkpoint]
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * (series.dormant == 1).sum(axis=1) / np.where(scored > 0, scored, np.nan)


def layer_counts(series: ReportSeries, score_fn: str) -> np.ndarray:
    """Number of dormant heads per layer: int64 [layer, checkpoint]."""
    states = series.dormant[series.fn_index(score_fn)]  # [head, checkpoint]
    return (states == 1).reshape(series.n_layers, series.n_heads, -1).sum(axis=1)


@dataclass(frozen=True)
class TransitionCounts:
    to_revisions: list[str]  # the later checkpoint of each interval (series order, first checkpoint excluded)
    fell: np.ndarray  # int64 [interval]: heads that fell dormant (active -> dormant)
    woke: np.ndarray  # int64 [interval]: heads that woke (dormant -> active)


def transition_counts(series: ReportSeries, score_fn: str) -> TransitionCounts:
    marks = series.marks[series.fn_index(score_fn)][:, 1:]  # [head, interval]
    return TransitionCounts(series.revisions[1:], (marks == 1).sum(axis=0), (marks == -1).sum(axis=0))


def score_bands(series: ReportSeries, score_fn: str) -> np.ndarray:
    """10th percentile, median and 90th percentile of the per-head mean scores: float64 [3, checkpoint]."""
    scores = series.score[series.fn_index(score_fn)]  # [head, checkpoint]
    out = np.full((3, scores.shape[1]), np.nan)
    ok = ~np.isnan(scores).all(axis=0)
    out[:, ok] = np.nanquantile(scores[:, ok], [0.1, 0.5, 0.9], axis=0)
    return out


@dataclass(frozen=True)
class DormantTraces:
    """The heads ever dormant under one function, each its score through training (the score band's overlay)."""

    labels: list[str]  # "L{layer}.H{head}" of the heads shown, the most often dormant first
    scores: np.ndarray  # float64 [shown head, checkpoint] per-head mean score (NaN: not scored)
    dormant: np.ndarray  # bool [shown head, checkpoint]
    n_ever: int  # heads dormant at one checkpoint or more (shown: the first `most`)


def dormant_traces(series: ReportSeries, score_fn: str, most: int = 24) -> DormantTraces:
    """Per head dormant at any checkpoint under `score_fn`, its score and states, the most often dormant first
    (ties: layer, then head); at most `most` of them, their total in `n_ever`."""
    i = series.fn_index(score_fn)
    dormant = series.dormant[i] == 1  # [head, checkpoint]
    ever = np.flatnonzero(dormant.any(axis=1))  # [ever-dormant head]
    order = ever[np.argsort(-dormant[ever].sum(axis=1), kind="stable")][:most]
    labels = [f"L{h // series.n_heads}.H{h % series.n_heads}" for h in order]
    return DormantTraces(labels, series.score[i][order], dormant[order], int(ever.size))


@dataclass(frozen=True)
class RateIntervals:
    """The heads whose state changed most under one function, each its dormant rate through training with the
    per-checkpoint 95% interval stored with it (`dormant_rate_low/high`: the rule and clusters of the confident
    states), and where its confident transitions land."""

    labels: list[str]  # "L{layer}.H{head}" of the heads shown
    rate: np.ndarray  # float64 [shown head, checkpoint] (NaN: not scored)
    low: np.ndarray  # float64 [shown head, checkpoint] (NaN: not scored, or no interval stored)
    high: np.ndarray  # float64 [shown head, checkpoint]
    confident: np.ndarray  # bool [shown head, checkpoint]: a confident transition into the checkpoint
    n_changed: int  # heads whose mask changed at least once (shown: the first `most`)


def rate_intervals(series: ReportSeries, score_fn: str, most: int = 6) -> RateIntervals:
    """Up to `most` heads whose mask changed, those with the most confident transitions first, then the most mask
    changes (ties: layer, then head), each with its dormant rate and interval at every checkpoint."""
    i = series.fn_index(score_fn)
    changes = (series.marks[i] != 0).sum(axis=1)  # [head]
    confident = (series.confident[i] & (series.marks[i] != 0)).sum(axis=1)  # [head]
    changed = np.flatnonzero(changes > 0)  # [changed head]
    order = changed[np.lexsort((changed, -changes[changed], -confident[changed]))][:most]
    labels = [f"L{h // series.n_heads}.H{h % series.n_heads}" for h in order]
    rates = series.rates if series.rates is not None else np.full((3, *series.score.shape), np.nan)
    rate, low, high = (rates[k, i][order] for k in range(3))
    marked = series.confident[i][order] & (series.marks[i][order] != 0)
    return RateIntervals(labels, rate, low, high, marked, int(changed.size))


def head_view(series: ReportSeries, score_fn: str) -> dict:
    """The per-head view's data (the report's <select> of heads, drawn by its inline script): per head its
    score at every checkpoint under `score_fn` to 4 significant digits (None: not scored) and its states as one
    string ("1" dormant, "0" active, "-" not scored), with the tau, its direction and the checkpoints' tokens.
    Plain JSON-ready values: at 1,024 heads x 300 checkpoints 2.3 MB of JSON in the page, 3.8 MB at 500 (measured)."""
    i = series.fn_index(score_fn)
    tau, direction = series.taus[score_fn]
    scores = series.score[i]  # [head, checkpoint]
    states = series.dormant[i]  # [head, checkpoint]
    symbol = np.array(["-", "0", "1"])
    return {
        "fn": score_fn,
        "tau": float(tau),
        "direction": direction,
        "revisions": list(series.revisions),
        "tokens": [format_tokens(t) for t in series.tokens],
        "heads": [f"L{h // series.n_heads}.H{h % series.n_heads}" for h in range(scores.shape[0])],
        "scores": [[None if np.isnan(x) else float(f"{x:.4g}") for x in row] for row in scores],
        "states": ["".join(symbol[row + 1]) for row in states],
    }


def agreement_iou(series: ReportSeries, checkpoint: int = -1) -> np.ndarray:
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


def series_tau_positions(store, series: ReportSeries, view: SeriesView | None = None) -> list[TauPosition]:
    """Per tracked function, where its tau sits at the series' reference checkpoint, with its warning
    (`tracking.tau_positions`: the same lines `dormant track` prints); `view`: the series' primary view, when open."""
    return positions_of(view or SeriesView.open(store, series.model_id))


# ---------------------------------------------------------------- interventions


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

    def within_text(self, fn: str) -> str:
        """The function's value as shown: "never within 1 point" / "within 1 point throughout" for a curve that
        never crossed base - 1 point (its value is the authors' 0), else to 2 decimals."""
        return within_text(self.within_1pt[fn], never_crossed(self.curves[fn], self.base_accuracy))

    def warning_lines(self) -> list[str]:
        """One line per distinct warning, naming the functions it concerns (a chance-level base: all of them)."""
        by_text: dict[str, list[str]] = {}
        for fn, found in self.warnings.items():
            for w in found:
                by_text.setdefault(w, []).append(fn)
        return [f"{', '.join(fns)}: {w}" if len(fns) < len(self.curves) else w for w, fns in by_text.items()]


def evaluation_groups(series: ReportSeries) -> list[EvaluationGroup]:
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


def dormancy_fns(series: ReportSeries) -> list[int]:
    """The indices in `series.score_fns` of its dormancy functions. The head-role functions (`--scores roles`) are
    attention to a target whose reading is Xu's selectivity, a head's role (their figure: the role shares), not a
    verdict against a tau: the % dormant figure and the summary table leave them out."""
    return [i for i, fn in enumerate(series.score_fns) if fn not in ROLE_IDS]


def summary_rows(series: ReportSeries) -> list[dict]:
    """One row per dormancy function (`dormancy_fns`): first checkpoint with a dormant head, final % dormant,
    transitions (of which `confident` and `blips` count those the intervals are sure of and those undone at once)."""
    pct = dormant_percent(series)  # [fn, checkpoint]
    rows = []
    for i in dormancy_fns(series):
        fn = series.score_fns[i]
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
    `series_data.transition_marks` gives). The counts of `summary_rows` (primary set) and of each calibration
    set's row."""
    changed = marks != 0
    return {
        "fell_dormant": int((marks == 1).sum()),
        "woke": int((marks == -1).sum()),
        "confident": int((confident & changed).sum()),
        "blips": int((blips & changed).sum()),
    }


@dataclass(frozen=True)
class RoleShareData:
    """The role-share figure's data: tokens [checkpoint], shares [role, checkpoint] in % of the heads, last_layers
    [role, layer] in % of each layer's heads at the last checkpoint, roles in drawing order (only those held by
    some head at some checkpoint, "unclassified" last)."""

    tokens: np.ndarray
    roles: tuple[str, ...]
    shares: np.ndarray
    last_layers: np.ndarray
    last_revision: str


def role_share_data(rs) -> RoleShareData:
    """From the findings' `role_shares` (findings/roles.py)."""
    names = list(rs.checkpoints[0].shares)
    shares = np.array([[100 * c.shares[r] for c in rs.checkpoints] for r in names])  # [role, checkpoint]
    last = rs.checkpoints[-1]
    layers = np.array([[100 * x for x in last.layer_shares[r]] for r in names])  # [role, layer]
    held = [i for i, r in enumerate(names) if shares[i].any() or r == "unclassified"]
    held.sort(key=lambda i: names[i] == "unclassified")
    tokens = np.array([c.tokens for c in rs.checkpoints], dtype=np.int64)
    return RoleShareData(tokens, tuple(names[i] for i in held), shares[held], layers[held], last.revision)
