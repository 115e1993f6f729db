"""The track run's steps around its checkpoints, without Prefect: the series' state (`series_state`), the pending
checkpoints, and what the run did (`TrackResult`). The other steps live beside it: the taus (`series_taus`), one
checkpoint's work (`checkpoint_work`), failures (`failures`), the derived tables (`derive`).

Every step takes the run's `TrackRequest` whole. The one orchestrator of a run is `dormant_tasks.run.run_track`
(the CLI's, the Prefect flow's body, a notebook's `dormant_tasks.track`): it asks `series_state` once (plan,
stored sets, taus, pending checkpoints), fixes the taus (`resolve_series_taus`), has every pending checkpoint
computed by its executor (`compute_checkpoint`: rows, no store) and writes each itself (`write_checkpoint`, the
one writer), then derives the transitions (`derive_series`); it returns a `TrackResult`. A checkpoint that
cannot be downloaded, loaded or scored is recorded as failed by the same writer (`record_failure`,
docs/DATA_CONTRACT.md "failed_checkpoints") and the run goes on, unless the request says `fail_fast`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.checkpoints import Revision
from dormant_tasks.errors import StoreError
from dormant_tasks.store import check_source, stored_checkpoint_keys
from dormant_tasks.tracking.budget import available_positions, search_done
from dormant_tasks.tracking.checkpoint_work import is_stored
from dormant_tasks.tracking.plan import (
    SeriesState,
    SeriesTaus,
    plan_series,
    with_stored_functions,
    with_stored_sets,
)
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import CheckpointResult
from dormant_tasks.tracking.series import SeriesView
from dormant_tasks.tracking.series_taus import stored_taus


def series_state(request: TrackRequest, cache: bool = True) -> SeriesState:
    """The series as this run finds it (docs/SCORES.md §3), asked once per run: `state.request` is the run's
    request (naming no calibration set, with the series' own sets: `with_stored_sets`). Refuses --tau,
    --scores, --reference or calibration sets that differ from a stored series' (unless --retau) before
    anything is loaded or written. `cache=False` (a dry run): the audit keeps nothing in the Hub cache."""
    check_source(request.store, request.model_id, request.source_identity)  # two sources are never one series
    plan = plan_series(request, cache)
    stored_sets = tuple(SeriesView.calibration_ids(request.store, request.model_id))  # () without a store
    request = with_stored_sets(request, stored_sets)
    if stored_sets:
        request = with_stored_functions(request, SeriesView.open(request.store, request.model_id, stored_sets[0]).taus)
    if request.retau and stored_sets:
        refuse_damaged(request.store, request.model_id, "--retau")  # all or nothing: it rewrites every checkpoint
    if request.retau or not stored_sets:
        return SeriesState(request, plan, stored_sets, None, None)
    taus = stored_taus(request, stored_sets)
    stored = stored_checkpoint_keys(request.store, request.model_id)
    pending = tuple(r for r in plan.selected if not is_stored(request, r, taus, stored))
    if request.budget is not None and pending and budget_spent(request, plan.selected, pending):
        pending = ()  # the budgeted search has nothing left to score: answered from the store
    return SeriesState(request, plan, stored_sets, taus, pending)


def budget_spent(request: TrackRequest, selected, pending) -> bool:
    """`--budget`: whether the search, from the checkpoints stored of the selection, would score nothing more."""
    available = list(selected)
    positions, one_step = available_positions(available)
    rates = stored_rates(request, [r for r in available if r not in set(pending)])
    at = {r.name: i for i, r in enumerate(available)}
    return search_done(
        positions, request.budget or 0, {at[n]: v for n, v in rates.items()}, request.resolution, one_step
    )


def stored_rates(request: TrackRequest, revisions) -> dict[str, np.ndarray]:
    """{revision name: its dormant rates, one per (score function, layer, head) in that order} of the stored
    checkpoints among `revisions`, under the series' current taus on its primary calibration set: what the
    budgeted search reads between its rounds. A head that one checkpoint lacks is nan there."""
    names = [r.name for r in revisions]
    if not names:
        return {}
    view = SeriesView.open(request.store, request.model_id)
    names = [n for n in names if n in set(view.revisions)]
    if not names:
        return {}
    keys = ["score_fn", "layer", "head_index"]
    t = view.head_scores(revisions=names, columns=["revision", *keys, "dormant_rate"])
    rows = t.to_pydict()
    heads = sorted(set(zip(*(rows[k] for k in keys))))
    where = {h: i for i, h in enumerate(heads)}
    out = {n: np.full(len(heads), np.nan) for n in names}
    for name, fn, layer, head, rate in zip(rows["revision"], *(rows[k] for k in keys), rows["dormant_rate"]):
        out[name][where[(fn, layer, head)]] = rate
    return out


def refuse_damaged(store, model_id: str, what: str) -> None:
    """StoreError naming the first damaged file of the series (checked whole: sizes, checksums, pages) and the
    fix, before `what` changes anything."""
    from dormant_tasks.store import damaged_files, store_root_of

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
