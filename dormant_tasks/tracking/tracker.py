"""The tracker's steps, without Prefect: the series' state, its taus, one checkpoint, the derived transitions.

Every step takes the run's `requests.TrackRequest` whole. The one orchestrator of a run is the track flow
(`flows/track.py`, through the task wrappers of `flows.tasks`): it asks `series_state` once (plan, stored
sets, taus, pending checkpoints), fixes the taus (`resolve_series_taus`), analyses every pending checkpoint
(`analyze_checkpoint`, or `compute_checkpoint` on a Dask worker + `write_checkpoint`, the one writer) and
derives the transitions (`derive_series`); it returns a `TrackResult`. A checkpoint that cannot be downloaded,
loaded or scored is recorded as failed (`record_failure`, docs/DATA_CONTRACT.md "failed_checkpoints") and the
run goes on, unless the request says `fail_fast`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks import __version__
from dormant_tasks.checkpoints.naming import Revision, list_revisions
from dormant_tasks.engine.score_functions import SCORING_VERSION
from dormant_tasks.errors import CheckpointError, ConfigError, DormantError, ScoringError, StoreError, did_you_mean
from dormant_tasks.requests import TrackRequest
from dormant_tasks.store.input_scores import keep_input_scores
from dormant_tasks.store.io import (
    CheckpointKey,
    check_source,
    commit_checkpoint,
    derived_file_key,
    drop_legacy_derived,
    is_store,
    read_metadata,
    read_table,
    series_lock,
    stored_checkpoint_keys,
    stored_requests,
    write_request,
    write_table,
)
from dormant_tasks.tracking.agreement import update_agreement
from dormant_tasks.tracking.calibration import CalibrationSet
from dormant_tasks.tracking.defaults import FDR
from dormant_tasks.tracking.masks import Tau, aggregate, needs_reference, resolve_taus, tau_specs, tau_warnings, taus_id
from dormant_tasks.tracking.series import SeriesView, open_views, result_id
from dormant_tasks.tracking.transitions import (
    FDR_KEY,
    apply_fdr,
    derive_transitions,
    fdr_record,
    head_histories,
    histories_of,
    mark_blips,
    predecessors,
    states_from_transitions,
)

if TYPE_CHECKING:
    from dormant_tasks.engine.scoring import InputScores


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


def load_checkpoint(*args, **kwargs):
    """`loading.load_checkpoint`, imported on first use: answering a rerun from the store needs no torch."""
    from dormant_tasks.checkpoints.loading import load_checkpoint as load

    return load(*args, **kwargs)


# ------------------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class SeriesPlan:
    """The whole series as listed now (training order), and the checkpoints this run selected from it."""

    listed: tuple[Revision, ...]
    selected: tuple[Revision, ...]
    skipped_names: tuple[str, ...] = ()


def plan_series(request: TrackRequest) -> SeriesPlan:
    listing = list_revisions(request.source, request.include_main, request.tokens_per_step)
    selected = request.selection.apply(listing.revisions)
    return SeriesPlan(tuple(listing.revisions), tuple(selected), tuple(listing.skipped))


def _with_stored_sets(request: TrackRequest, stored_sets: tuple[str, ...]) -> TrackRequest:
    """A run that names no calibration set (no --calibration or --texts) of a stored series tracks the series'
    own sets, as a stored request of the series names them (with the run's --limit, else the stored one), when
    they give the same calibration ids; else the request as it is (and a set that differs from the series' is
    refused by `stored_taus`, with the fix)."""
    if request.calibrations or request.texts or not stored_sets:
        return request
    if [c.calibration_id for c in request.calibration_sets] == list(stored_sets):
        return request
    for text in stored_requests(request.store, request.model_id):  # newest first
        try:
            old = TrackRequest.from_json(text)
            limit = old.limit if request.limit is None else request.limit
            same = replace(request, texts=old.texts, calibrations=old.calibrations, limit=limit)
            if [c.calibration_id for c in same.calibration_sets] == list(stored_sets):
                return same
        except (DormantError, OSError):  # an evaluate request, a texts file moved since: not this one
            continue
    return request


@dataclass
class SeriesState:
    """What one run needs to know of its series, asked once (loads no model): the plan, the calibration sets
    the store holds for the series, its taus when this run keeps them, and the checkpoints still to analyse."""

    request: TrackRequest  # the run's request; naming no calibration set, with the stored series' own sets
    plan: SeriesPlan
    stored_sets: tuple[str, ...]  # calibration ids of the stored series, the primary first; () = a new series
    taus: SeriesTaus | None  # the stored taus checked against the request; None: this run fixes them (new, --retau)
    pending: tuple[Revision, ...] | None  # selected, not stored for every set; None: unknown until the taus are

    @property
    def is_new(self) -> bool:
        return not self.stored_sets

    @property
    def done(self) -> bool:
        """Every selected checkpoint is stored with the series' taus: the run answers from the store."""
        return self.pending == ()


def series_state(request: TrackRequest) -> SeriesState:
    """The series as this run finds it (docs/SCORES.md §3), asked once per run: `state.request` is the run's
    request (naming no calibration set, with the series' own sets: `_with_stored_sets`). Refuses --tau,
    --scores, --reference or calibration sets that differ from a stored series' (unless --retau) before
    anything is loaded or written."""
    check_source(request.store, request.model_id, request.source_identity)  # two sources are never one series
    plan = plan_series(request)
    stored_sets = tuple(SeriesView.calibration_ids(request.store, request.model_id))  # () without a store
    request = _with_stored_sets(request, stored_sets)
    if request.retau and stored_sets:
        refuse_damaged(request.store, request.model_id, "--retau")  # all or nothing: it rewrites every checkpoint
    if request.retau or not stored_sets:
        return SeriesState(request, plan, stored_sets, None, None)
    taus = stored_taus(request, stored_sets)
    stored = stored_checkpoint_keys(request.store, request.model_id)
    pending = tuple(r for r in plan.selected if not is_stored(request, r, taus, stored))
    return SeriesState(request, plan, stored_sets, taus, pending)


def refuse_damaged(store, model_id: str, what: str) -> None:
    """StoreError naming the first damaged file of the series (checked whole: sizes, checksums, pages) and the
    fix, before `what` changes anything."""
    from dormant_tasks.store.io import store_root_of
    from dormant_tasks.store.repair import damaged_files

    damage = damaged_files(store, model_id)
    if damage:
        root = store_root_of(damage[0].path)
        first = f"{damage[0].path.relative_to(root)} ({damage[0].reason})"
        more = f" and {len(damage) - 1} more" if len(damage) > 1 else ""
        raise StoreError(
            f"{what}: nothing was changed: series {model_id} has a damaged file, {first}{more}; run `dormant store "
            f"repair --store {root}`, then run this again"
        )


def pending_revisions(request: TrackRequest, state: SeriesState, series: SeriesTaus) -> list[Revision]:
    """The checkpoints the run still analyses once its taus are fixed: `state.pending`, or (taus fixed by
    this run) the selected ones not stored under them, less the one `resolve_series_taus` analysed already."""
    done = series.reference.revision if series.reference is not None else None
    if state.pending is not None:
        return [r for r in state.pending if r != done]
    stored = stored_checkpoint_keys(request.store, request.model_id)
    return [r for r in state.plan.selected if r != done and not is_stored(request, r, series, stored)]


# ------------------------------------------------------------------------------------------------ taus


@dataclass
class SetTaus:
    """The taus of one calibration set of the series (fixed per series and set)."""

    calibration: CalibrationSet
    taus: dict[str, Tau]
    taus_id: str
    warnings: tuple[str, ...] = ()  # taus that cannot mark what they aim at (`masks.tau_warnings`)


@dataclass
class SeriesTaus:
    """The taus of every calibration set of the run, the primary set first."""

    sets: tuple[SetTaus, ...]
    reference: CheckpointResult | None = None  # the reference checkpoint, already analysed with these taus

    @property
    def taus(self) -> dict[str, Tau]:
        return self.sets[0].taus

    @property
    def taus_id(self) -> str:
        return self.sets[0].taus_id

    @property
    def warnings(self) -> tuple[str, ...]:
        if len(self.sets) == 1:
            return self.sets[0].warnings
        return tuple(f"{s.calibration.name}: {w}" for s in self.sets for w in s.warnings)

    def of(self, calibration_id: str) -> SetTaus:
        for s in self.sets:
            if s.calibration.calibration_id == calibration_id:
                return s
        raise StoreError(f"calibration set {calibration_id} is not one of this run's")


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


def taus_checkpoint(request: TrackRequest, plan: SeriesPlan) -> Revision:
    """The checkpoint `resolve_series_taus` scores first for a new series: the reference of quantile taus, or
    (all taus fixed) the first selected checkpoint."""
    specs = tau_specs(request.score_fn_ids, request.taus)
    return reference_revision(request, plan) if needs_reference(specs) else plan.selected[0]


def stored_taus(request: TrackRequest, stored_sets) -> SeriesTaus:
    """The stored series' taus for this run, refused (StoreError naming the fix) when the run's calibration
    sets, --scores, --reference or --tau differ from the series'."""
    specs = tau_specs(request.score_fn_ids, request.taus)
    wanted = [c.calibration_id for c in request.calibration_sets]
    if wanted != list(stored_sets):
        raise StoreError(
            f"series {request.model_id!r} was tracked with calibration set(s) {', '.join(stored_sets)}, not "
            f"{', '.join(wanted)}; results on different calibration sets are not comparable. Pass the same "
            "--calibration/--texts/--limit (in the same order), another --store, or re-tau the whole series "
            "with --retau"
        )
    out = []
    for cal in request.calibration_sets:
        taus = _check_against_stored(
            request, specs, SeriesView.open(request.store, request.model_id, cal.calibration_id)
        )
        # The reference's scores are not at hand: only the random warning, which needs none, is recomputed.
        out.append(SetTaus(cal, taus, taus_id(taus), tuple(tau_warnings(taus))))
    return SeriesTaus(tuple(out))


def resolve_series_taus(request: TrackRequest, state: SeriesState, score=None) -> SeriesTaus:
    """docs/SCORES.md §3: the series' taus are fixed the first time it is tracked and reused afterwards.

    A stored series (no --retau): `state.taus`, checked by `series_state`. A new series with quantile taus
    scores its reference checkpoint first; it is stored only when selected. With fixed taus only, a new
    series, or a `--retau` that brings a calibration set the series has not scored, scores its first selected
    checkpoint before the taus are written (bad input leaves the store untouched). `score` scores that
    checkpoint (default `score_checkpoint`, here; the Dask flow passes one that runs it on a worker).
    """
    if state.taus is not None:
        return state.taus
    plan = state.plan
    score = score or score_checkpoint
    specs = tau_specs(request.score_fn_ids, request.taus)
    sets = request.calibration_sets
    if not needs_reference(specs):
        # Fixed taus need no reference; the first selected checkpoint is scored before anything is written, so
        # a calibration set or a checkpoint the run cannot score leaves the store untouched.
        taus = resolve_taus(specs)
        series = SeriesTaus(tuple(SetTaus(c, taus, taus_id(taus), tuple(tau_warnings(taus))) for c in sets))
        stored = set(state.stored_sets)
        if stored and all(c.calibration_id in stored for c in sets):
            # A --retau of a stored series on sets it has scored already: nothing new to try on a model first,
            # and its checkpoints may be re-aggregated from kept per-input scores without loading any.
            _write_taus(request, series, plan.selected[-1])
            return series
        scored = score(request, taus_checkpoint(request, plan))
        _write_taus(request, series, plan.selected[-1])
        series.reference = write_checkpoint(request, rows_of(request, scored, series))
        return series
    reference = taus_checkpoint(request, plan)
    scored = score(request, reference)  # every set, one model load
    out = []
    for one in scored:
        v, fns = one.scores.values, one.scores.score_fns
        taus = resolve_taus(specs, v, fns, reference.name)
        out.append(SetTaus(one.calibration, taus, taus_id(taus), tuple(tau_warnings(taus, v, fns))))
    series = SeriesTaus(tuple(out))
    _write_taus(request, series, reference)
    if reference in plan.selected:
        series.reference = write_checkpoint(request, rows_of(request, scored, series))
    return series


def _check_against_stored(request: TrackRequest, specs, view: SeriesView) -> dict[str, Tau]:
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


def _write_taus(request: TrackRequest, series: SeriesTaus, reference: Revision) -> None:
    rows = [
        {
            **common_columns(request.model_id, reference),
            **t.row(),
            "calibration_id": one.calibration.calibration_id,
            "taus_id": one.taus_id,
        }
        for one in series.sets  # the primary set's rows first: `SeriesView` reads it as the series' default
        for t in one.taus.values()
    ]
    # One taus file per series (all its calibration sets): a re-tau replaces it; results of the old taus stay,
    # keyed by their taus_id.
    with series_lock(request.store, request.model_id):
        write_request(request.store, request.model_id, request)
        write_table(request.store, "taus", rows, file_key="taus")


# ------------------------------------------------------------------------------------------ checkpoints


@dataclass
class ScoredCheckpoint:
    revision: Revision
    commit: str
    scores: InputScores  # imported for type checking only: the engine (torch) loads when a model is scored
    n_layers: int
    n_heads: int
    dtype: str
    device: str
    seconds: dict[str, float] = field(default_factory=dict)
    calibration: CalibrationSet | None = None  # the set `scores` are of (None: the run's primary set)


@dataclass
class CheckpointResult:
    revision: Revision
    commit: str
    skipped: bool
    seconds: dict[str, float]
    pct_dormant: dict[str, float]  # score_fn -> % of heads dormant
    n_truncated: int = 0  # calibration inputs cut to the model's context (or --max-tokens)
    failed: str | None = None  # why it could not be downloaded, loaded or scored (recorded; a rerun retries)
    truncated: dict[str, int] = field(default_factory=dict)  # calibration set -> its inputs cut (when any)


def checkpoint_key(
    request: TrackRequest, revision: Revision, commit: str, tid: str, calibration_id=None
) -> CheckpointKey:
    cal = calibration_id or request.calibration.calibration_id
    return CheckpointKey(revision.name, commit, cal, tid, SCORING_VERSION)


def known_commit(revision: Revision) -> str | None:
    """The commit without loading anything: the Hub sha, or a local folder's content hash."""
    if revision.commit:
        return revision.commit
    if revision.path is not None:
        from dormant_tasks.checkpoints.hub import local_content_hash

        return local_content_hash(Path(revision.path))
    return None


def is_stored(
    request: TrackRequest, revision: Revision, series: SeriesTaus, stored: set[CheckpointKey] | None = None
) -> bool:
    """True when the checkpoint's result is stored for every calibration set of the run (loads nothing)."""
    commit = known_commit(revision)
    if commit is None:
        return False
    stored = stored_checkpoint_keys(request.store, request.model_id) if stored is None else stored
    return all(
        checkpoint_key(request, revision, commit, one.taus_id, one.calibration.calibration_id) in stored
        for one in series.sets
    )


def score_checkpoint(request: TrackRequest, revision: Revision, progress: bool = False) -> tuple[ScoredCheckpoint, ...]:
    """Load one checkpoint once and score every calibration set of the run with every function.

    Each set is batched on its own (never mixed with another set's texts), so its scores are bitwise those
    of a run on that set alone; k sets cost one pass over their inputs and one model load.
    """
    from dormant_tasks.engine.scoring import score_texts

    # The hub module evicts a downloaded revision once it is loaded, unless --keep-checkpoints.
    loaded = load_checkpoint(
        request.source, revision, request.dtype, request.device, request.cache_dir, keep=request.keep_checkpoints
    )
    out = []
    try:
        device = str(next(loaded.model.parameters()).device)
        for k, cal in enumerate(request.calibration_sets):
            t0 = time.perf_counter()
            try:
                scores = score_texts(
                    loaded.model,
                    loaded.tokenizer,
                    cal.texts,
                    request.score_fn_ids,
                    batch_size=request.batch_size,
                    seed=request.seed,
                    progress=progress,
                    max_tokens=request.max_tokens,
                    max_batch_tokens=request.max_batch_tokens,
                    warn_truncated=False,  # the run's summary warns once, with the count
                )
            except ScoringError as e:
                raise ScoringError(f"calibration set {cal.name}: {e}") from None
            n_layers, n_heads = scores.values.shape[2:]
            seconds = {"score": time.perf_counter() - t0}
            if k == 0:  # the download and load are the checkpoint's, counted once
                seconds = {"download": loaded.seconds_download, "load": loaded.seconds_load, **seconds}
            out.append(
                ScoredCheckpoint(
                    revision, loaded.commit, scores, n_layers, n_heads, request.dtype, device, seconds, cal
                )
            )
    finally:
        del loaded.model
    return tuple(out)


@dataclass
class CheckpointRows:
    """One checkpoint's result as rows, ready to store: computed anywhere (a Dask worker that cannot see the
    store), written by the one writer (`write_checkpoint`, in the flow's process)."""

    revision: Revision
    commit: str
    head_scores: pa.Table
    input_scores: pa.Table | None  # None: not kept (the run's --input-scores policy)
    checkpoint: dict  # the `checkpoints` (manifest) row, less `seconds` of the write
    seconds: dict[str, float]
    n_truncated: int


def checkpoint_rows(request: TrackRequest, scored: ScoredCheckpoint, series: SeriesTaus) -> CheckpointRows:
    """Aggregate the per-input scores to the dormancy mask; the rows of head_scores, input_scores and checkpoints."""
    cal = scored.calibration or request.calibration
    one = series.of(cal.calibration_id)
    rev, tid = scored.revision, one.taus_id
    common = common_columns(request.model_id, rev)
    cal_id = cal.calibration_id
    sc = scored.scores
    heads = aggregate(sc.values, sc.score_fns, one.taus, sc.n_tokens, sc.first_boundary)
    heads = _with_columns(heads, {**common, "calibration_id": cal_id, "taus_id": tid})
    inputs = None
    if keep_input_scores(request.input_scores, scored.scores.values.size):
        inputs = _with_columns(scored.scores.to_table(), {**common, "calibration_id": cal_id})
    row = {
        **common,
        "commit": scored.commit,
        "n_layers": scored.n_layers,
        "n_heads": scored.n_heads,
        "calibration_id": cal_id,
        "n_inputs": len(cal.texts),
        "dtype": scored.dtype,
        "device": scored.device,
        "code_version": __version__,
        "taus_id": tid,
        "scoring_version": SCORING_VERSION,
        "ingredient": rev.ingredient,
        "request_id": request.request_id,
    }
    return CheckpointRows(rev, scored.commit, heads, inputs, row, dict(scored.seconds), scored.scores.n_truncated)


def rows_of(
    request: TrackRequest, scored: tuple[ScoredCheckpoint, ...], series: SeriesTaus
) -> tuple[CheckpointRows, ...]:
    """Every set's rows of one scored checkpoint (`checkpoint_rows` per set)."""
    return tuple(checkpoint_rows(request, one, series) for one in scored)


def write_checkpoint(request: TrackRequest, rows: tuple[CheckpointRows, ...]) -> CheckpointResult:
    """The one writer of a checkpoint's results: per calibration set its head_scores (+ input_scores) files,
    then its manifest row (`store.commit_checkpoint`); then any failure recorded for it is cleared. The
    result reported is the primary set's, with the seconds of every set."""
    write_request(request.store, request.model_id, request)
    seconds: dict[str, float] = {}
    for one in rows:
        t0 = time.perf_counter()
        row = {**one.checkpoint, "analyzed_at": datetime.now(UTC), "seconds": sum(one.seconds.values())}
        commit_checkpoint(request.store, row, one.head_scores, one.input_scores)
        for k, v in {**one.seconds, "write": time.perf_counter() - t0}.items():
            seconds[k] = seconds.get(k, 0.0) + v
    first = rows[0]
    clear_failure(request, first.revision)
    return CheckpointResult(
        first.revision,
        first.commit,
        False,
        seconds,
        pct_dormant(first.head_scores),
        max(r.n_truncated for r in rows),
        truncated={r.checkpoint["calibration_id"]: r.n_truncated for r in rows if r.n_truncated},
    )


def compute_checkpoint(
    request: TrackRequest, revision: Revision, series: SeriesTaus, progress: bool = False
) -> tuple[CheckpointRows, ...]:
    """Load, score and aggregate one checkpoint (every set) without touching the store (what a Dask worker runs)."""
    return rows_of(request, score_checkpoint(request, revision, progress), series)


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
    """Skip a stored checkpoint without loading it; else load, score, aggregate and write it. A checkpoint that
    cannot be downloaded, loaded or scored is recorded as failed and returned as such (`fail_fast`: raised)."""
    if is_stored(request, revision, series):
        return CheckpointResult(revision, known_commit(revision) or "", True, {}, {})
    if request.retau:
        rescored = reaggregate_from_input_scores(request, revision, series)
        if rescored is not None:
            return rescored
    try:
        scored = score_checkpoint(request, revision, progress)
    except CHECKPOINT_FAILURES as e:
        if request.fail_fast:
            raise
        return record_failure(request, revision, str(e))
    return write_checkpoint(request, rows_of(request, scored, series))


def reaggregate_from_input_scores(
    request: TrackRequest, revision: Revision, series: SeriesTaus
) -> CheckpointResult | None:
    """Re-tau without loading the model when this checkpoint's per-input scores were kept for every set of the
    run (docs/SCORES.md §3); None when one set lacks them (the checkpoint is scored again)."""
    commit = known_commit(revision)
    if commit is None:
        return None
    scored = []
    for cal in request.calibration_sets:
        one = _kept_scores(request, revision, commit, cal)
        if one is None:
            return None
        scored.append(one)
    return write_checkpoint(request, rows_of(request, tuple(scored), series))


def _kept_scores(
    request: TrackRequest, revision: Revision, commit: str, cal: CalibrationSet
) -> ScoredCheckpoint | None:
    cal_id = cal.calibration_id
    ckpts = read_table(
        request.store,
        "checkpoints",
        model_id=request.model_id,
        filters={"revision": revision.name, "calibration_id": cal_id, "scoring_version": SCORING_VERSION},
    )
    if commit not in ckpts.column("commit").to_pylist():
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
    from dormant_tasks.engine.scoring import InputScores

    # input_scores keep no token counts and no first-token kinds: length_slope and boundary_gap come out NaN
    # (docs/SCORES.md, "Input dependence"), never 0.
    scores = InputScores(tuple(request.score_fn_ids), values, np.zeros(n_inputs, np.int64))
    return ScoredCheckpoint(revision, commit, scores, n_layers, n_heads, row["dtype"], row["device"], {}, cal)


# ------------------------------------------------------------------------------------------ failures

# What makes one checkpoint fail, not the run: it cannot be downloaded or loaded (`CheckpointError`: a truncated
# file, a revision the Hub lost), or its inputs cannot be scored on it (`ScoringError`). A bad option, a store
# error or a full disk stops the run (exit 2); anything else is a bug and keeps its traceback.
CHECKPOINT_FAILURES = (CheckpointError, ScoringError)
FAILURES_KEY = "failed"  # file key of a series' one failed_checkpoints file


def record_failure(request: TrackRequest, revision: Revision, reason: str) -> CheckpointResult:
    """Record that `revision` failed (one row per revision, the newest reason wins) and return it as a result."""
    row = {
        **common_columns(request.model_id, revision),
        "commit": known_commit(revision),
        "reason": reason,
        "failed_at": datetime.now(UTC),
        "request_id": request.request_id,
    }
    with series_lock(request.store, request.model_id):
        rows = [r for r in failed_checkpoints(request.store, request.model_id) if r["revision"] != revision.name]
        write_request(request.store, request.model_id, request)
        write_table(request.store, "failed_checkpoints", [*rows, row], file_key=FAILURES_KEY, model_id=request.model_id)
    return CheckpointResult(revision, row["commit"] or "", False, {}, {}, failed=reason)


def clear_failure(request: TrackRequest, revision: Revision) -> None:
    """A checkpoint stored now is no longer failed: its row goes (nothing is read or written when it has none)."""
    rows = failed_checkpoints(request.store, request.model_id)
    if not any(r["revision"] == revision.name for r in rows):
        return
    with series_lock(request.store, request.model_id):
        rows = [r for r in failed_checkpoints(request.store, request.model_id) if r["revision"] != revision.name]
        write_table(request.store, "failed_checkpoints", rows, file_key=FAILURES_KEY, model_id=request.model_id)


def failed_checkpoints(store, model_id: str) -> list[dict]:
    """The series' checkpoints that failed and were not stored since, in series order (none without a store)."""
    if not is_store(store):
        return []
    rows = read_table(store, "failed_checkpoints", model_id=model_id).to_pylist()  # no file: a glob, no read
    return sorted(rows, key=lambda r: (r["stage"], r["step"], r["revision"]))


# ------------------------------------------------------------------------------------------ the run's result


@dataclass(frozen=True)
class TrackResult:
    """What a track run did, for the CLI to print (the flow returns it; a rerun answered from the store too)."""

    model_id: str
    store: str
    analysed: int  # checkpoints scored (or re-aggregated) and stored by this run
    skipped: int  # already stored: loaded nothing
    failed: tuple[tuple[str, str], ...] = ()  # (revision, reason) of this run's failed checkpoints, series order
    n_checkpoints: int | None = None  # the series' checkpoints after the run (its current taus, primary set)
    n_transitions: int | None = None
    n_stale: int = 0
    taus_id: str | None = None
    request_id: str | None = None
    warnings: tuple[str, ...] = ()
    n_truncated: int = 0  # the most calibration inputs truncated on one checkpoint
    truncated: dict[str, int] = field(default_factory=dict)  # calibration set -> the most cut on one checkpoint
    input_scores: str | None = None  # the run's --input-scores policy (None: nothing was scored)
    report: str | None = None  # the report's index.html

    @classmethod
    def of(cls, request: TrackRequest, results: list[CheckpointResult], **kw) -> TrackResult:
        failed = tuple((r.revision.name, r.failed) for r in results if r.failed is not None)
        done = [r for r in results if not r.skipped and r.failed is None]
        return cls(
            model_id=request.model_id,
            store=request.store,
            analysed=len(done),
            skipped=sum(r.skipped for r in results),
            failed=failed,
            request_id=request.request_id,
            n_truncated=max((r.n_truncated for r in results), default=0),
            truncated={cal: max(r.truncated.get(cal, 0) for r in results) for r in results for cal in r.truncated},
            **kw,
        )


# ------------------------------------------------------------------------------------------ transitions


@dataclass
class SeriesSummary:
    n_checkpoints: int
    n_transitions: int
    transitions_by_fn: dict[str, int]
    n_stale: int = 0  # checkpoints stored only under older taus (a partial --retau)


# Above this many new checkpoint pairs, derivation reads the whole series once instead of pair by pair.
INCREMENTAL_MAX_PAIRS = 16
PAIRS_KEY = "dormant.pairs"  # transitions/head_histories metadata: the checkpoint pairs they were derived from
DERIVED_BY_KEY = "dormant.derived_by"  # ... and the code version that derived them (another: derived again)


def fdr_level(store, model_id: str, view: SeriesView) -> float | None:
    """The level at which the stored `confident` of a view's transitions was decided by BH q-values; None when
    they were stored before q-values were (`confident` is then the uncorrected p < 0.05)."""
    key = derived_file_key("transitions", view.taus_id, view.calibration_id)
    record = (read_metadata(store, "transitions", model_id, key) or {}).get(FDR_KEY)
    return float(json.loads(record)["level"]) if record else None


def derive_series(request: TrackRequest) -> SeriesSummary:
    """Bring the series' transitions and head histories up to date with its current checkpoints, for every
    calibration set of the series (each its own `SeriesView`); the summary is the primary set's.

    Incremental (docs/DATA_CONTRACT.md, "Derived tables"): both files record the checkpoint pairs (predecessor,
    checkpoint: manifest `file_key` and `analyzed_at`) they were derived from. Nothing is read or written
    when the pairs are unchanged; a new pair reads the head_scores of its two checkpoints only, and the
    histories are rebuilt from the first checkpoint's head_scores and the transitions. Without that record
    (or with more than INCREMENTAL_MAX_PAIRS new pairs) the whole series is derived again.
    """
    return rederive(request.store, request.model_id, request.fdr)


def rederive(store, model_id: str, fdr: float | None = None) -> SeriesSummary:
    """`derive_series` of a series by name (`dormant track`, also a finished rerun; `dormant store repair`).
    `fdr` None keeps each set's stored level of the confident transitions (the default level where none is)."""
    views = open_views(store, model_id)
    summaries = [derive_set(store, model_id, view, fdr) for view in views]
    update_agreement(store, model_id, views)  # >= 2 sets: their masks compared (1 set: nothing)
    return summaries[0]


def _derived_metadata(store, table: str, model_id: str, file_key: str) -> dict[str, str]:
    """A derived file's metadata; {} when it is missing, damaged or of another code version: derived again."""
    try:
        meta = read_metadata(store, table, model_id, file_key) or {}
    except StoreError:  # unreadable: derived again, which replaces it
        return {}
    return meta if meta.get(DERIVED_BY_KEY) == __version__ else {}


def derive_set(store, model_id: str, view: SeriesView, fdr: float | None = None) -> SeriesSummary:
    """`derive_series` for one calibration set (`view`)."""
    ckpts = view.checkpoints_table()
    ids, pairs = series_pairs(view)
    tkey = derived_file_key("transitions", view.taus_id, view.calibration_id)
    hkey = derived_file_key("head_histories", view.taus_id, view.calibration_id)
    stored = _derived_metadata(store, "transitions", model_id, tkey)
    histories = _derived_metadata(store, "head_histories", model_id, hkey)
    recorded = json.dumps(sorted(pairs))
    if fdr is None:
        fdr = float(json.loads(stored[FDR_KEY])["level"]) if FDR_KEY in stored else FDR
    same_rule = stored.get(FDR_KEY) == fdr_record(fdr)  # else the q-values are (re)computed from the stored p's
    if stored.get(PAIRS_KEY) == recorded and histories.get(PAIRS_KEY) == recorded and same_rule:
        try:
            return _summary(view, view.transitions())
        except StoreError:  # metadata readable, pages damaged: derived again below
            stored = {}
    old_pairs = set(json.loads(stored[PAIRS_KEY])) if PAIRS_KEY in stored else None
    new_pairs = set(pairs) if old_pairs is None else set(pairs) - old_pairs
    old = None
    if old_pairs is not None and len(new_pairs) <= INCREMENTAL_MAX_PAIRS:
        try:
            old = view.transitions()
        except StoreError:  # damaged: the whole series is derived again
            old = None
    if old is None:
        heads = view.head_scores()
        trans, hist = derive_transitions(heads, ckpts, fdr), head_histories(heads, ckpts)
    else:
        assert old_pairs is not None
        revision_of = {i: c["revision"] for i, c in zip(ids, view.checkpoints)}
        kept = {(revision_of[a], revision_of[b]) for a, b in (p.split(">") for p in set(pairs) & old_pairs)}
        keep = [k in kept for k in zip(old.column("from_revision").to_pylist(), old.column("to_revision").to_pylist())]
        parts = [old.filter(pa.array(keep, pa.bool_()))]
        for a, b in (p.split(">") for p in sorted(new_pairs)):
            two = [revision_of[a], revision_of[b]]
            sub = ckpts.filter(pc.is_in(ckpts.column("revision"), value_set=pa.array(two)))
            parts.append(derive_transitions(view.head_scores(revisions=two), sub))
        trans = _in_series_order(pa.concat_tables(parts), view.revisions)
        first = view.head_scores(revisions=view.revisions[:1])
        hist = histories_of(states_from_transitions(first, trans, ckpts))
    trans = apply_fdr(mark_blips(trans), fdr_families(view, len(pairs)), fdr)  # over the whole series
    meta = {PAIRS_KEY: recorded, DERIVED_BY_KEY: __version__}
    with series_lock(store, model_id):
        write_table(
            store, "transitions", trans, file_key=tkey, model_id=model_id, metadata=meta | {FDR_KEY: fdr_record(fdr)}
        )
        write_table(store, "head_histories", hist, file_key=hkey, model_id=model_id, metadata=meta)
        drop_legacy_derived(store, model_id, view.taus_id)
    return _summary(view, trans)


def fdr_families(view: SeriesView, n_pairs: int) -> dict[tuple[str, str, str, str], int]:
    """Per tracked function of the view, the size of its family of paired tests: heads x compared pairs."""
    n_cells = max((int(c["n_layers"]) * int(c["n_heads"]) for c in view.checkpoints), default=0)
    return {(view.model_id, view.calibration_id, view.taus_id, fn): n_cells * n_pairs for fn in view.taus}


def series_pairs(view: SeriesView) -> tuple[list[str], list[str]]:
    """Per current checkpoint an id (file_key@analyzed_at), and the compared pairs as "pred_id>id" strings."""
    ids = [result_id(c) for c in view.checkpoints]
    stage = np.array([c["stage"] for c in view.checkpoints], dtype=np.int64)
    ingredient = np.array([c["ingredient"] or 0 for c in view.checkpoints], dtype=np.int64)
    pred = predecessors(stage, ingredient)  # view.checkpoints are in series order
    return ids, [f"{ids[p]}>{ids[i]}" for i, p in enumerate(pred.tolist()) if p >= 0]


def _in_series_order(trans: pa.Table, revisions: list[str]) -> pa.Table:
    """The row order of `derive_transitions` over the whole series: score_fn, then checkpoint, then head."""
    rank = {r: i for i, r in enumerate(revisions)}
    to_rank = pa.array([rank[r] for r in trans.column("to_revision").to_pylist()], pa.int64())
    keyed = trans.append_column("_rank", to_rank)
    keyed = keyed.sort_by(
        [("score_fn", "ascending"), ("_rank", "ascending"), ("layer", "ascending"), ("head_index", "ascending")]
    )
    return keyed.drop_columns(["_rank"])


def _summary(view: SeriesView, trans: pa.Table) -> SeriesSummary:
    by_fn: dict[str, int] = {}
    for fn in trans.column("score_fn").to_pylist():
        by_fn[fn] = by_fn.get(fn, 0) + 1
    return SeriesSummary(len(view.checkpoints), trans.num_rows, by_fn, view.n_stale)
