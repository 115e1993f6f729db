"""The tracker's steps, without Prefect: plan the series, fix its taus, analyse one checkpoint, derive transitions.

Every step takes the run's `requests.TrackRequest` whole. `flows/track.py` calls these through the thin
task wrappers of `dormant_tasks.tasks`; tests and the overhead benchmark call them directly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import __version__
from .checkpoints import Revision, list_revisions
from .errors import ConfigError, StoreError, did_you_mean
from .loading import load_checkpoint
from .masks import Tau, aggregate, needs_reference, resolve_taus, tau_specs, tau_warnings, taus_id
from .requests import TrackRequest
from .score_functions import SCORING_VERSION
from .scoring import InputScores, score_texts
from .series import SeriesView
from .store import (
    CheckpointKey,
    checkpoint_file_key,
    read_table,
    series_lock,
    stored_checkpoint_keys,
    write_request,
    write_table,
)
from .transitions import derive_transitions, head_histories

# Per-input scores are kept by default only while they stay small (docs/DATA_CONTRACT.md: off by default for big models).
INPUT_SCORES_AUTO_LIMIT = 2_000_000


def common_columns(model_id: str, revision: Revision) -> dict:
    return {
        "model_id": model_id,
        "revision": revision.name,
        "stage": revision.stage,
        "step": revision.step,
        "tokens": revision.tokens,
    }


def _with_columns(table: pa.Table, columns: dict) -> pa.Table:
    for name, value in columns.items():
        table = table.append_column(name, pa.array([value] * table.num_rows))
    return table


# ------------------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class SeriesPlan:
    """The whole series as listed now (training order), and the checkpoints this run selected from it."""

    listed: tuple[Revision, ...]
    selected: tuple[Revision, ...]
    skipped_names: tuple[str, ...] = ()


def plan_series(request: TrackRequest) -> SeriesPlan:
    listing = list_revisions(request.source, include_main=request.include_main)
    selected = request.selection.apply(listing.revisions)
    return SeriesPlan(tuple(listing.revisions), tuple(selected), tuple(listing.skipped))


# ------------------------------------------------------------------------------------------------ taus


@dataclass
class SeriesTaus:
    taus: dict[str, Tau]
    taus_id: str
    reference: CheckpointResult | None = None  # the reference checkpoint, already analysed with these taus
    warnings: tuple[str, ...] = ()  # taus that cannot mark what they aim at (`masks.tau_warnings`)


def reference_revision(request: TrackRequest, plan: SeriesPlan) -> Revision:
    """docs/SCORES.md §3: the last checkpoint of the whole series as listed (not of this run's selection), or --reference."""
    if request.reference is None:
        return plan.listed[-1]
    for r in plan.listed:
        if r.name == request.reference:
            return r
    names = [r.name for r in plan.listed]
    raise ConfigError(
        f"--reference {request.reference!r} is not a checkpoint of {request.model_id}"
        f"{did_you_mean(request.reference, names)}; run `dormant checkpoints` to see the names"
    )


def resolve_series_taus(request: TrackRequest, plan: SeriesPlan) -> SeriesTaus:
    """docs/SCORES.md §3: the series' taus are fixed the first time it is tracked and reused afterwards.

    Explicit `--tau`/`--reference` that differ from the stored ones are refused unless `retau` is set. A new
    series with quantile taus scores its reference checkpoint first; it is stored only when selected.
    """
    specs = tau_specs(request.score_fn_ids, request.taus)
    if not request.retau and SeriesView.exists(request.store, request.model_id):
        taus = _check_against_stored(request, specs, SeriesView.open(request.store, request.model_id))
        # The reference's scores are not at hand: only the random warning, which needs none, is recomputed.
        return SeriesTaus(taus, taus_id(taus), warnings=tuple(tau_warnings(taus)))
    if not needs_reference(specs):
        taus = resolve_taus(specs)
        _write_taus(request, taus, plan.selected[-1])
        return SeriesTaus(taus, taus_id(taus), warnings=tuple(tau_warnings(taus)))
    reference = reference_revision(request, plan)
    scored = score_checkpoint(request, reference)
    taus = resolve_taus(specs, scored.scores.values, scored.scores.score_fns, reference.name)
    _write_taus(request, taus, reference)
    series = SeriesTaus(
        taus, taus_id(taus), warnings=tuple(tau_warnings(taus, scored.scores.values, scored.scores.score_fns))
    )
    if reference in plan.selected:
        series.reference = write_checkpoint(request, scored, series)
    return series


def _check_against_stored(request: TrackRequest, specs, view: SeriesView) -> dict[str, Tau]:
    if view.calibration_id != request.calibration.calibration_id:
        raise StoreError(
            f"series {request.model_id!r} was tracked with calibration set {view.calibration_id}, not "
            f"{request.calibration.calibration_id}; results on different calibration sets are not "
            "comparable. Use the same --texts/--limit, another --store, or re-tau the whole series "
            "with --retau"
        )
    missing = [fn for fn in request.score_fn_ids if fn not in view.taus]
    if missing:
        raise StoreError(
            f"series {request.model_id!r} was tracked without {', '.join(missing)}; its taus are fixed. "
            "Track the same --scores, or re-tau the whole series with --retau"
        )
    if request.reference is not None and request.reference != view.reference_revision:
        raise StoreError(
            f"--reference {request.reference}: the series {request.model_id!r} fixed its quantile taus "
            f"from {view.reference_revision}; drop --reference, or re-tau the whole series with --retau"
        )
    overridden = {t.split("=", 1)[0].strip() for t in request.taus}
    for spec in (s for s in specs.values() if s.score_fn in overridden):
        old = view.taus[spec.score_fn]
        same = (spec.value is not None and old.source == "fixed" and old.value == spec.value) or (
            spec.quantile is not None and old.source == "quantile" and old.quantile == spec.quantile
        )
        if not same:
            source = (
                old.source if old.quantile is None else f"{old.source} q={old.quantile:g} of {old.reference_revision}"
            )
            raise StoreError(
                f"--tau {spec.score_fn}: the series {request.model_id!r} already uses tau = {old.value:g} ({source}); "
                "mixing taus would make checkpoints incomparable. Drop --tau, or re-tau the whole series with --retau"
            )
    return {fn: view.taus[fn] for fn in request.score_fn_ids}


def _write_taus(request: TrackRequest, taus: dict[str, Tau], reference: Revision) -> None:
    tid = taus_id(taus)
    rows = [
        {
            **common_columns(request.model_id, reference),
            "score_fn": t.score_fn,
            "tau": t.value,
            "direction": t.direction,
            "source": t.source,
            "quantile": t.quantile,
            "reference_revision": t.reference_revision,
            "calibration_id": request.calibration.calibration_id,
            "taus_id": tid,
        }
        for t in taus.values()
    ]
    write_request(request.store, request.model_id, request)
    # One taus file per series: a re-tau replaces it; results of the old taus stay, keyed by their taus_id.
    write_table(request.store, "taus", rows, file_key="taus")


# ------------------------------------------------------------------------------------------ checkpoints


@dataclass
class ScoredCheckpoint:
    revision: Revision
    commit: str
    scores: InputScores
    n_layers: int
    n_heads: int
    dtype: str
    device: str
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class CheckpointResult:
    revision: Revision
    commit: str
    skipped: bool
    seconds: dict[str, float]
    pct_dormant: dict[str, float]  # score_fn -> % of heads dormant
    n_truncated: int = 0  # calibration inputs cut to the model's context (or --max-tokens)


def checkpoint_key(request: TrackRequest, revision: Revision, commit: str, tid: str) -> CheckpointKey:
    return CheckpointKey(revision.name, commit, request.calibration.calibration_id, tid, SCORING_VERSION)


def known_commit(revision: Revision) -> str | None:
    """The commit without loading anything: the Hub sha, or a local folder's content hash."""
    if revision.commit:
        return revision.commit
    if revision.path is not None:
        from .loading import local_content_hash

        return local_content_hash(Path(revision.path))
    return None


def is_stored(request: TrackRequest, revision: Revision, tid: str, stored: set[CheckpointKey] | None = None) -> bool:
    commit = known_commit(revision)
    if commit is None:
        return False
    stored = stored_checkpoint_keys(request.store, request.model_id) if stored is None else stored
    return checkpoint_key(request, revision, commit, tid) in stored


def score_checkpoint(request: TrackRequest, revision: Revision, progress: bool = False) -> ScoredCheckpoint:
    """Load one checkpoint and score the calibration set with every function in one pass per batch."""
    # The hub module evicts a downloaded revision once it is loaded, unless --keep-checkpoints.
    loaded = load_checkpoint(
        request.source, revision, request.dtype, request.device, request.cache_dir, keep=request.keep_checkpoints
    )
    try:
        t0 = time.perf_counter()
        scores = score_texts(
            loaded.model,
            loaded.tokenizer,
            request.calibration.texts,
            request.score_fn_ids,
            batch_size=request.batch_size,
            seed=request.seed,
            progress=progress,
            max_tokens=request.max_tokens,
            max_batch_tokens=request.max_batch_tokens,
        )
        seconds_score = time.perf_counter() - t0
        n_layers, n_heads = scores.values.shape[2:]
        device = str(next(loaded.model.parameters()).device)
    finally:
        del loaded.model
    return ScoredCheckpoint(
        revision,
        loaded.commit,
        scores,
        n_layers,
        n_heads,
        request.dtype,
        device,
        {"download": loaded.seconds_download, "load": loaded.seconds_load, "score": seconds_score},
    )


def write_checkpoint(request: TrackRequest, scored: ScoredCheckpoint, series: SeriesTaus) -> CheckpointResult:
    """Aggregate to the dormancy mask and write head_scores (+ input_scores), then the checkpoints row last."""
    t0 = time.perf_counter()
    rev, tid = scored.revision, series.taus_id
    key = checkpoint_key(request, rev, scored.commit, tid)
    file_key = checkpoint_file_key(key)
    common = common_columns(request.model_id, rev)
    cal_id = request.calibration.calibration_id
    heads = aggregate(scored.scores.values, scored.scores.score_fns, series.taus)
    heads = _with_columns(heads, {**common, "calibration_id": cal_id, "taus_id": tid})
    keep_inputs = request.input_scores
    if keep_inputs is None:
        keep_inputs = scored.scores.values.size <= INPUT_SCORES_AUTO_LIMIT
    write_request(request.store, request.model_id, request)
    with series_lock(request.store, request.model_id):
        if keep_inputs:
            inputs = _with_columns(scored.scores.to_table(), {**common, "calibration_id": cal_id})
            write_table(request.store, "input_scores", inputs, file_key=file_key)
        write_table(request.store, "head_scores", heads, file_key=file_key)
        seconds = {**scored.seconds, "write": time.perf_counter() - t0}
        write_table(
            request.store,
            "checkpoints",
            [
                {
                    **common,
                    "commit": scored.commit,
                    "n_layers": scored.n_layers,
                    "n_heads": scored.n_heads,
                    "calibration_id": cal_id,
                    "n_inputs": len(request.calibration.texts),
                    "dtype": scored.dtype,
                    "device": scored.device,
                    "seconds": sum(seconds.values()),
                    "analyzed_at": datetime.now(UTC),
                    "code_version": __version__,
                    "taus_id": tid,
                    "scoring_version": SCORING_VERSION,
                    "ingredient": rev.ingredient,
                    "request_id": request.request_id,
                }
            ],
            file_key=file_key,
        )
    return CheckpointResult(rev, scored.commit, False, seconds, pct_dormant(heads), scored.scores.n_truncated)


def pct_dormant(head_scores: pa.Table) -> dict[str, float]:
    out = {}
    for fn in pc.unique(head_scores.column("score_fn")).to_pylist():
        d = (
            head_scores.filter(pc.equal(head_scores.column("score_fn"), fn))
            .column("dormant")
            .to_numpy(zero_copy_only=False)
        )
        out[fn] = 100.0 * float(np.mean(d)) if d.size else 0.0
    return out


def analyze_checkpoint(
    request: TrackRequest, revision: Revision, series: SeriesTaus, progress: bool = False
) -> CheckpointResult:
    """Skip a stored checkpoint without loading it; else load, score, aggregate and write it."""
    if is_stored(request, revision, series.taus_id):
        return CheckpointResult(revision, known_commit(revision) or "", True, {}, {})
    if request.retau:
        rescored = reaggregate_from_input_scores(request, revision, series)
        if rescored is not None:
            return rescored
    return write_checkpoint(request, score_checkpoint(request, revision, progress), series)


def reaggregate_from_input_scores(
    request: TrackRequest, revision: Revision, series: SeriesTaus
) -> CheckpointResult | None:
    """Re-tau without loading the model when this checkpoint's per-input scores were kept (docs/SCORES.md §3)."""
    commit = known_commit(revision)
    cal_id = request.calibration.calibration_id
    ckpts = read_table(
        request.store,
        "checkpoints",
        model_id=request.model_id,
        filters={"revision": revision.name, "calibration_id": cal_id, "scoring_version": SCORING_VERSION},
    )
    if commit is None or commit not in ckpts.column("commit").to_pylist():
        return None
    inputs = read_table(
        request.store,
        "input_scores",
        model_id=request.model_id,
        filters={"revision": revision.name, "calibration_id": cal_id},
    )
    if inputs.num_rows == 0 or set(request.score_fn_ids) - set(pc.unique(inputs.column("score_fn")).to_pylist()):
        return None
    row = ckpts.filter(pc.equal(ckpts.column("commit"), commit)).to_pylist()[0]
    n_inputs, n_layers, n_heads = row["n_inputs"], row["n_layers"], row["n_heads"]
    values = np.full((n_inputs, len(request.score_fn_ids), n_layers, n_heads), np.nan)
    cols = {
        c: inputs.column(c).to_numpy(zero_copy_only=False)
        for c in ("input_index", "score_fn", "layer", "head_index", "score")
    }
    for f, fn in enumerate(request.score_fn_ids):
        sel = cols["score_fn"] == fn
        values[cols["input_index"][sel], f, cols["layer"][sel], cols["head_index"][sel]] = cols["score"][sel]
    scored = ScoredCheckpoint(
        revision,
        commit,
        InputScores(tuple(request.score_fn_ids), values, np.zeros(n_inputs, np.int64)),
        n_layers,
        n_heads,
        row["dtype"],
        row["device"],
        {},
    )
    return write_checkpoint(request, scored, series)


def pending_revisions(request: TrackRequest, plan: SeriesPlan) -> list[Revision] | None:
    """The selected checkpoints not yet stored with the series' taus, or None for a series whose taus are
    not fixed yet (or are being replaced). Loads no model: a rerun on a stored series costs only this."""
    if request.retau or not SeriesView.exists(request.store, request.model_id):
        return None
    series = resolve_series_taus(request, plan)  # validates --tau/--scores/calibration against the series
    stored = stored_checkpoint_keys(request.store, request.model_id)
    return [r for r in plan.selected if not is_stored(request, r, series.taus_id, stored)]


# ------------------------------------------------------------------------------------------ transitions


@dataclass
class SeriesSummary:
    n_checkpoints: int
    n_transitions: int
    transitions_by_fn: dict[str, int]
    n_stale: int = 0  # checkpoints stored only under older taus (a partial --retau)


def derive_series(request: TrackRequest) -> SeriesSummary:
    """Rewrite the series' transitions and head histories from its current checkpoints (`SeriesView`)."""
    view = SeriesView.open(request.store, request.model_id)
    heads, ckpts = view.head_scores(), view.checkpoints_table()
    trans = derive_transitions(heads, ckpts)
    hist = head_histories(heads, ckpts)
    with series_lock(request.store, request.model_id):
        write_table(
            request.store, "transitions", trans, file_key=f"transitions-{view.taus_id}", model_id=request.model_id
        )
        write_table(
            request.store, "head_histories", hist, file_key=f"head_histories-{view.taus_id}", model_id=request.model_id
        )
    by_fn: dict[str, int] = {}
    for fn in trans.column("score_fn").to_pylist():
        by_fn[fn] = by_fn.get(fn, 0) + 1
    return SeriesSummary(len(view.checkpoints), trans.num_rows, by_fn, view.n_stale)
