"""The series' taus, fixed once per series and calibration set (docs/SCORES.md §3): read back from the store, or
resolved on the reference checkpoint of a new series (`resolve_series_taus`, which scores it) and written with
the run's request; a run whose --tau, --scores or --reference differ from the stored series' is refused
(unless --retau)."""

from __future__ import annotations

from dormant_tasks.checkpoints import Revision
from dormant_tasks.errors import ConfigError, StoreError, did_you_mean
from dormant_tasks.store import Table, series_lock, write_request, write_table
from dormant_tasks.tracking.checkpoint_work import rows_of, score_checkpoint, write_checkpoint
from dormant_tasks.tracking.masks import Tau, needs_reference, resolve_taus, tau_specs, tau_warnings, taus_id
from dormant_tasks.tracking.plan import SeriesPlan, SeriesState, SeriesTaus, SetTaus
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import common_columns
from dormant_tasks.tracking.series import SeriesView


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


def taus_step(request: TrackRequest, plan: SeriesPlan) -> str:
    """What a new series' run is doing while it scores `taus_checkpoint`, in words: which checkpoint, and why that
    one (the reference of its quantile taus; with fixed taus only, the first selected, tried before anything is
    written)."""
    checkpoint = taus_checkpoint(request, plan).name
    if needs_reference(tau_specs(request.score_fn_ids, request.taus)):
        return f"scoring {checkpoint}, the reference checkpoint of its quantile taus"
    return f"scoring {checkpoint} first (its taus are fixed values; one checkpoint is tried before any is written)"


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


def resolve_series_taus(request: TrackRequest, state: SeriesState, score=None, write=None) -> SeriesTaus:
    """docs/SCORES.md §3: the series' taus are fixed the first time it is tracked and reused afterwards.

    A stored series (no --retau): `state.taus`, checked by `series_state`. A new series with quantile taus
    scores its reference checkpoint first; it is stored only when selected. With fixed taus only, a new
    series, or a `--retau` that brings a calibration set the series has not scored, scores its first selected
    checkpoint before the taus are written (bad input leaves the store untouched). `score` scores that
    checkpoint (default `score_checkpoint`, here; a run passes its executor's, which on Dask runs it on a worker);
    `write` writes its rows (default `write_checkpoint`; a run passes its one writer, the function every other
    checkpoint of the run is written by, so this one takes the same path).
    """
    if state.taus is not None:
        return state.taus
    plan = state.plan
    score = score or score_checkpoint
    write = write or write_checkpoint
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
        first = taus_checkpoint(request, plan)
        scored = score(request, first)
        _write_taus(request, series, plan.selected[-1])
        series.reference = write(request, first, rows_of(request, scored, series))
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
        series.reference = write(request, reference, rows_of(request, scored, series))
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
        write_table(request.store, Table.taus, rows, file_key=Table.taus)
