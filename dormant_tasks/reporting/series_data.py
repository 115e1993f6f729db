"""A series as its report reads it: every head's state, score and transition marks per score function.

The series is what the store says, read through `tracking.series.SeriesView`: head states come from
`head_scores.dormant`, transitions from the `transitions` table (so stage-2 ingredient branches keep the
predecessors the tracker gave them), evaluations from `evaluation.stored`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.engine import ALL_IDS, get_score_function
from dormant_tasks.errors import ReportError, did_you_mean
from dormant_tasks.evaluation import series_evaluations
from dormant_tasks.statistics import FDR, FDR_METHOD
from dormant_tasks.tracking import (
    SeriesView,
    StoreFolder,
    confirm_transitions,
    dormant_matrices,
    failed_checkpoints,
    fdr_rule,
    stored_series,
)


@dataclass(frozen=True)
class ReportSeries:
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
    windows: tuple[tuple[int, int], ...] = ()  # (layer, sliding window in tokens) of the windowed layers, in order
    set_aside: tuple[dict, ...] = ()  # `set_aside_checkpoints` rows: branches the integrity audit set aside
    identical: tuple[tuple[str, ...], ...] = ()  # checkpoints whose scores are bit-identical (the second net)
    # float64 [3, fn, layer*n_heads+head, checkpoint]: dormant_rate and its 95% interval, dormant_rate_low and
    # dormant_rate_high (the confident states' rule and clusters); NaN where not scored or not stored
    rates: np.ndarray | None = None

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
    models = stored_series(store)
    if not models:
        raise ReportError(f"the store {store} holds no analysed checkpoints; run `dormant track --model ...` first")
    if model_id is None:
        if len(models) > 1:
            raise ReportError(f"the store holds {len(models)} models; pick one with --model: {', '.join(models)}")
        return models[0]
    if model_id not in models:
        raise ReportError(
            f"model {model_id!r} is not in the store{did_you_mean(model_id, models)}; it holds: {', '.join(models)}"
        )
    return model_id


def load_series(
    store,
    model_id: str | None,
    fdr: float = FDR,
    calibration_id: str | None = None,
    fdr_method: str = FDR_METHOD,
    view: SeriesView | None = None,
) -> ReportSeries:
    """One model's current series (`SeriesView`) on its primary calibration set, or on `calibration_id`;
    ReportError when the store cannot give a consistent one. Confident transitions at `fdr` by `fdr_method`: the
    stored ones when they were decided by that rule, else decided again from the dormant rates read here. `view`: the
    series' view when the caller opened it already."""
    root = StoreFolder.open(store)  # checked once (a StoreFolder as it is)
    model_id = resolve_model_id(root, model_id)
    if view is None and not SeriesView.exists(root, model_id):
        raise ReportError(
            f"{model_id} has no tracked checkpoints in the store (evaluations only?); run `dormant track --model {model_id}`"
        )
    view = view or SeriesView.open(root, model_id, calibration_id)  # (a report opened it already)
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
            f"taus {view.taus_id}); the store is incomplete: run `dormant track --model {model_id}` again"
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
    rates = np.full((3, *shape), np.nan)  # [rate / low / high, fn, head, checkpoint]
    for k, name in enumerate(("dormant_rate", "dormant_rate_low", "dormant_rate_high")):
        rates[k, fn, head, col] = hs[name].to_numpy(zero_copy_only=False).astype(np.float64)  # null -> NaN
    taus = {f: (view.taus[f].value, str(view.taus[f].direction)) for f in score_fns}

    tr = view.transitions(score_fns)
    if fdr_rule(root, model_id, view) != (fdr, fdr_method):
        tr = confirm_transitions(tr, dormant_matrices(hs, view.checkpoints_table()), fdr, fdr_method)
    marks, confident, blips = transition_marks(tr, revisions, score_fns, n_heads, shape)
    changes = (np.diff(dormant.astype(np.int16), axis=2) != 0) & (dormant[:, :, 1:] >= 0) & (dormant[:, :, :-1] >= 0)
    if not marks.any() and changes.any():
        raise ReportError(
            f"the `transitions` table has no rows for {model_id} although its head states change; "
            f"run `dormant track --model {model_id}` again to derive them"
        )
    return ReportSeries(
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
        view.tau_rows(),
        series_evaluations(root, model_id).to_pylist(),
        tuple(failed_checkpoints(root, model_id)),
        windowed_layers(hs),
        view.duplicates,
        tuple(tuple(g) for g in view.identical_scores()),
        rates,
    )


def windowed_layers(hs: pa.Table) -> tuple[tuple[int, int], ...]:
    """(layer, window) of every layer whose `head_scores` rows carry a sliding window (null: full attention, or
    stored before the column), in layer order; a layer stored with several windows gives its largest."""
    rows = hs.select(["layer", "sliding_window"]).filter(pc.is_valid(hs["sliding_window"]))
    if rows.num_rows == 0:
        return ()
    largest = rows.group_by("layer").aggregate([("sliding_window", "max")]).sort_by("layer")
    return tuple(zip(largest["layer"].to_pylist(), largest["sliding_window_max"].to_pylist(), strict=True))


def transition_marks(tr: pa.Table, revisions, score_fns, n_heads, shape) -> tuple[np.ndarray, ...]:
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
    confident[fn, head, col] = pc.fill_null(tr["confident"], False).to_numpy(zero_copy_only=False).astype(bool)
    blips[fn, head, col] = pc.fill_null(tr["blip"], False).to_numpy(zero_copy_only=False).astype(bool)
    return marks, confident, blips
