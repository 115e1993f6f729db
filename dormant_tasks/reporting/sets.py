"""The "Calibration sets" section of the report of a series tracked on several sets: their agreement, each set's
row, and the heads whose dormancy depends most on the set (with each set's length dependence)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from dormant_tasks.reporting.figure_data import transition_tally
from dormant_tasks.reporting.series_data import ReportSeries, transition_marks
from dormant_tasks.tracking import SeriesView, stored_agreement


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
    # (set a, set b) -> int64 [checkpoint] heads dormant on either set (-1: not both scored): what a Jaccard rests on
    union: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)


SET_NONE, SET_SOME, SET_ALL = 0, 1, 2  # CalibrationSets.states: dormant on no set, some of them, every one


def calibration_sets(views, series: ReportSeries, score_fn: str) -> CalibrationSets | None:
    """The section's data from the series' `open_views`; None with fewer than 2 calibration sets (no section)."""
    if len(views) < 2:
        return None
    table = stored_agreement(views[0].store, series.model_id)  # tracked before the table existed: computed
    ids = [v.calibration_id for v in views]
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1 :]]
    rows = table.to_pylist()
    mine = [r for r in rows if r["score_fn"] == score_fn]
    revisions = list(dict.fromkeys(r["revision"] for r in mine))  # the table is in series order
    tokens = {r["revision"]: r["tokens"] for r in mine}
    col = {rev: j for j, rev in enumerate(revisions)}
    jaccard = {p: np.full(len(revisions), np.nan) for p in pairs}
    union = {p: np.full(len(revisions), -1, dtype=np.int64) for p in pairs}
    for r in mine:
        pair, j = (r["calibration_a"], r["calibration_b"]), col[r["revision"]]
        jaccard[pair][j] = r["jaccard"]
        union[pair][j] = r["n_dormant_a"] + r["n_dormant_b"] - r["n_both"]
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
        union,
    )


def _set_row(view: SeriesView, fns: list[str], n_heads: int, n_cells: int) -> dict:
    """One set's line of the section's table: its last checkpoint's % dormant and its transitions, counted as
    the summary counts the primary set's (`transition_marks`, then `transition_tally`)."""
    last = view.revisions[-1] if view.revisions else None
    pct, tally = None, transition_tally(np.zeros(0, np.int8), np.zeros(0, bool), np.zeros(0, bool))
    if fns and last is not None:
        d = view.head_scores(fns, [last], columns=["dormant"]).column("dormant").to_numpy(zero_copy_only=False)
        pct = round(100.0 * float(np.mean(d)), 2) if d.size else None
        revisions = pa.array(view.revisions, pa.string())
        shape = (len(fns), n_cells, len(view.revisions))  # [fn, head, checkpoint]
        tally = transition_tally(*transition_marks(view.transitions(fns), revisions, tuple(fns), n_heads, shape))
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


def length_dependence(views, series: ReportSeries, score_fn: str, top: int = 8) -> LengthDependence | None:
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
