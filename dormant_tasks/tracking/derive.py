"""The derived tables of a series: transitions, head histories and the agreement of its calibration sets, derived
incrementally after each run (`derive_series`) and again whenever they are missing, damaged or stale (`rederive`:
on a finished rerun and after `store repair`). Each file records the checkpoint pairs it was derived from and
the code version that derived it, and the false discovery rate of its q-values."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.errors import StoreError
from dormant_tasks.statistics import FDR, FDR_METHOD
from dormant_tasks.store import (
    SCHEMAS,
    Table,
    derived_file_key,
    drop_legacy_derived,
    read_metadata,
    series_lock,
    write_table,
)
from dormant_tasks.tracking.agreement import update_agreement
from dormant_tasks.tracking.decision import derived_revisions
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.results import result_id
from dormant_tasks.tracking.series import SeriesView, open_views
from dormant_tasks.tracking.transition_files import (
    DECISION_KEY,
    PAIRS_KEY,
    PENDING,
    added_counts,
    append_part,
    can_append,
    counts_of,
    in_series_order,
    stored_counts,
    transitions_metadata,
    write_whole,
)
from dormant_tasks.tracking.transitions import (
    FDR_KEY,
    apply_decisions,
    fdr_record,
    histories_of,
    mark_blips,
    mask_changes,
    predecessors,
    recorded_choice,
    states_from_transitions,
    stored_rule,
)
from dormant_tasks.version import __version__


@dataclass
class SeriesSummary:
    n_checkpoints: int
    n_transitions: int
    transitions_by_fn: dict[str, int]
    n_stale: int = 0  # checkpoints stored only under older taus (a partial --retau)


# Above this many new checkpoint pairs, derivation reads the whole series once instead of pair by pair.
INCREMENTAL_MAX_PAIRS = 16
DERIVED_BY_KEY = "dormant.derived_by"  # ... and the code version that derived them (another: derived again)


def fdr_rule(store, model_id: str, view: SeriesView) -> tuple[float, str] | None:
    """(level, method) at which the stored `confident` of a view's transitions was decided by confident states;
    None when they were stored under an older rule (derived again by the next `dormant track` or `store repair`)."""
    key = derived_file_key(Table.transitions, view.taus_id, view.calibration_id)
    return stored_rule((read_metadata(store, Table.transitions, model_id, key) or {}).get(FDR_KEY))


def derive_series(request: TrackRequest) -> SeriesSummary:
    """Bring the series' transitions and head histories up to date with its current checkpoints, for every
    calibration set of the series (each its own `SeriesView`); the summary is the primary set's.

    Incremental (docs/DATA_CONTRACT.md, "Derived tables"): both files record the checkpoint pairs (predecessor,
    checkpoint: manifest `file_key` and `analyzed_at`) they were derived from. Nothing is read or written
    when the pairs are unchanged; a new pair reads the head_scores of its two checkpoints only, and the
    histories are rebuilt from the first checkpoint's head_scores and the transitions. Without that record
    (or with more than INCREMENTAL_MAX_PAIRS new pairs) the whole series is derived again. Either way the
    confident-state decision is left pending for the first read (`decision`): a run's cost stays flat in the
    series (benchmarks/store_scale.py).
    """
    return rederive(request.store, request.model_id, request.fdr, request.fdr_method)


def rederive(store, model_id: str, fdr: float | None = None, method: str | None = None) -> SeriesSummary:
    """`derive_series` of a series by name (`dormant track`, also a finished rerun; `dormant store repair`).
    `fdr`/`method` None keep each set's stored rule of the confident transitions (the defaults where none is)."""
    views = open_views(store, model_id, checked=False)  # every read below checks the files it opens
    summaries = [derive_set(store, model_id, view, fdr, method) for view in views]
    update_agreement(store, model_id, views)  # >= 2 sets: their masks compared (1 set: nothing)
    return summaries[0]


def _derived_metadata(store, table: str, model_id: str, file_key: str) -> dict[str, str]:
    """A derived file's metadata; {} when it is missing, damaged or of another code version: derived again."""
    try:
        meta = read_metadata(store, table, model_id, file_key) or {}
    except StoreError:  # unreadable: derived again, which replaces it
        return {}
    return meta if meta.get(DERIVED_BY_KEY) == __version__ else {}


def derive_set(
    store, model_id: str, view: SeriesView, fdr: float | None = None, method: str | None = None
) -> SeriesSummary:
    """`derive_series` for one calibration set (`view`). The mask changes are derived pair by pair; whether each
    is confident is decided over the whole series (minutes at 1,000 checkpoints of 1,024 heads x 15 functions), so
    a derivation leaves that decision pending (`decision`: the first read of the transitions takes it).

    An append at the end of the series writes only its new pairs' rows, as a part of the stored transitions
    (`transition_files`), and the head histories from the stored ones: its cost does not grow with the series.
    Anything else (a checkpoint replaced or inserted, another rule, the PARTS_MAX-th part, a file missing or
    damaged) writes the transitions whole, parts folded in."""
    ckpts = view.checkpoints_table()
    ids, pairs = series_pairs(view)
    hkey = derived_file_key(Table.head_histories, view.taus_id, view.calibration_id)
    stored = _transitions_record(view)
    histories = _derived_metadata(store, Table.head_histories, model_id, hkey)
    recorded = json.dumps(sorted(pairs))
    rule = recorded_choice(stored.get(FDR_KEY))  # the level and correction chosen, kept across rules
    fdr = fdr if fdr is not None else rule[0] if rule else FDR
    method = method if method is not None else rule[1] if rule else FDR_METHOD
    same_rule = stored.get(FDR_KEY) == fdr_record(fdr, method)  # else `confident` is decided again
    if stored.get(PAIRS_KEY) == recorded and histories.get(PAIRS_KEY) == recorded and same_rule:
        counts = stored_counts(stored)
        try:
            return _summary(view, counts if counts is not None else counts_of(view.stored_transitions()))
        except StoreError:  # metadata readable, pages damaged: derived again below
            stored = {}
    old_pairs = set(json.loads(stored[PAIRS_KEY])) if PAIRS_KEY in stored else None
    new_pairs = set(pairs) if old_pairs is None else set(pairs) - old_pairs
    meta = {PAIRS_KEY: recorded, DERIVED_BY_KEY: __version__}
    old = hist = None
    if old_pairs is not None and len(new_pairs) <= INCREMENTAL_MAX_PAIRS:
        new_rows, stepped = _pair_rows(view, ckpts, ids, new_pairs)
        if old_pairs <= set(pairs) and histories.get(PAIRS_KEY) == stored.get(PAIRS_KEY):
            hist = appended_histories(view, ids, old_pairs, stepped)  # the stored histories are of the stored pairs
        if hist is not None and same_rule and can_append(stored):  # an append at the end: a part
            rows = mark_blips(apply_decisions(in_series_order(new_rows, view.revisions), {}))
            with series_lock(store, model_id):
                append_part(view, rows, sorted(new_pairs), {DERIVED_BY_KEY: __version__, FDR_KEY: stored[FDR_KEY]})
                write_table(store, Table.head_histories, hist, file_key=hkey, model_id=model_id, metadata=meta)
            counts = stored_counts(stored)
            if counts is None:  # a base that keeps no counts: counted, with the part just written
                return _summary(view, counts_of(view.stored_transitions()))
            return _summary(view, added_counts(counts, counts_of(rows)))
        try:
            old = view.stored_transitions()
        except StoreError:  # damaged: the whole series is derived again
            old = None
    if old is None:
        trans, matrices = mask_changes(view.head_scores(), ckpts)
        hist = histories_of(matrices)
    else:
        assert old_pairs is not None
        if old_pairs <= set(pairs):  # nothing replaced (an append): every stored row stays
            parts = [old]
        else:
            revision_of = {i: c["revision"] for i, c in zip(ids, view.checkpoints)}
            kept = [(revision_of[a], revision_of[b]) for a, b in (p.split(">") for p in set(pairs) & old_pairs)]
            parts = [old.filter(_of_pairs(old, view.revisions, kept))]
        trans = in_series_order(pa.concat_tables([*parts, new_rows]), view.revisions)
        if hist is None:  # not an append at the end: rebuilt from the first checkpoint and the transitions
            first = view.head_scores(revisions=view.revisions[:1])
            hist = histories_of(states_from_transitions(first, trans, ckpts))
    trans = mark_blips(apply_decisions(trans, {}))  # undecided: kept rows were decided over fewer checkpoints
    pending = {DECISION_KEY: PENDING}  # decided when first read (`decision.decide_pending`)
    with series_lock(store, model_id):
        write_whole(view, trans, meta | {FDR_KEY: fdr_record(fdr, method)} | pending)
        write_table(store, Table.head_histories, hist, file_key=hkey, model_id=model_id, metadata=meta)
        drop_legacy_derived(store, model_id, view.taus_id)
    return _summary(view, counts_of(trans))


def mask_change_counts(view: SeriesView) -> dict[str, int]:
    """The stored mask changes per function of a view's current checkpoints ({} when none are stored): from the
    files' metadata (`dormant.counts`) when they keep it and every row is of a current checkpoint, else counted."""
    meta, current = _stored_record(view)
    counts = stored_counts(meta)
    if counts is not None and current:
        return {f: n for f, n in counts.items() if n}
    return counts_of(view.stored_transitions())


def derived_lag(view: SeriesView) -> tuple[int, int] | None:
    """(checkpoints the stored transitions were derived over, the view's current checkpoints) when the stored
    pairs are not the current ones (a run stopped between storing checkpoints and deriving: the next `dormant
    track` derives the rest); None when they are current, or there are none to compare. Reads metadata only."""
    meta, current = _stored_record(view)
    if not meta or current or len(view.checkpoints) < 2:
        return None
    return len(derived_revisions(view, meta)), len(view.checkpoints)


def _stored_record(view: SeriesView) -> tuple[dict[str, str], bool]:
    """The stored transitions' record ({} when unreadable: status names damage through its checks) and whether its
    pairs are the view's current ones."""
    try:
        meta = transitions_metadata(view)
    except StoreError:
        return {}, False
    return meta, set(json.loads(meta.get(PAIRS_KEY, "[]"))) == set(series_pairs(view)[1])


def _transitions_record(view: SeriesView) -> dict[str, str]:
    """The stored transitions' record (`transitions_metadata`: the base's and its parts'); {} when a file is
    missing, damaged or of another code version: derived again, whole."""
    try:
        meta = transitions_metadata(view)
    except StoreError:
        return {}
    return meta if meta.get(DERIVED_BY_KEY) == __version__ else {}


def _pair_rows(view: SeriesView, ckpts: pa.Table, ids: list[str], new_pairs: set[str]) -> tuple[pa.Table, list]:
    """The mask changes of some checkpoint pairs ("pred_id>id"), each from its two checkpoints' head_scores alone;
    and per pair (the later checkpoint's id, the pair's dormant matrices)."""
    revision_of = {i: c["revision"] for i, c in zip(ids, view.checkpoints)}
    rows, stepped = [], []
    for a, b in (p.split(">") for p in sorted(new_pairs)):
        two = [revision_of[a], revision_of[b]]
        sub = ckpts.filter(pc.is_in(ckpts.column("revision"), value_set=pa.array(two)))
        changes, matrices = mask_changes(view.head_scores(revisions=two), sub)
        rows.append(changes)
        stepped.append((b, matrices))
    return (pa.concat_tables(rows) if rows else SCHEMAS[Table.transitions].empty_table()), stepped


def series_pairs(view: SeriesView) -> tuple[list[str], list[str]]:
    """Per current checkpoint an id (file_key@analyzed_at), and the compared pairs as "pred_id>id" strings."""
    ids = [result_id(c) for c in view.checkpoints]
    stage = np.array([c["stage"] for c in view.checkpoints], dtype=np.int64)
    ingredient = np.array([c["ingredient"] or 0 for c in view.checkpoints], dtype=np.int64)
    pred = predecessors(stage, ingredient)  # view.checkpoints are in series order
    return ids, [f"{ids[p]}>{ids[i]}" for i, p in enumerate(pred.tolist()) if p >= 0]


def appended_histories(view: SeriesView, ids: list[str], old_pairs: set[str], stepped: list) -> pa.Table | None:
    """The head histories after an append at the end of the series, from the stored ones and the new pairs' own
    dormant matrices alone (O(heads) per new checkpoint, whatever the series' length); None when the new
    checkpoints are not all after every stored one in series order, or the stored histories do not line up (then
    they are rebuilt). `stepped`: (the new checkpoint's id, the dormant matrices of its pair), per new pair."""
    position = {i: k for k, i in enumerate(ids)}
    named = {i for pair in old_pairs for i in pair.split(">")}
    if not named or not stepped or any(i not in position for i in named):
        return None
    new = sorted((position[b], matrices) for b, matrices in stepped)
    if new[0][0] <= max(position[i] for i in named) or len(new) + len(named) != len(ids):
        return None
    try:
        old = view.histories()
    except StoreError:
        return None
    fns = old.column("score_fn").to_numpy(zero_copy_only=False)
    layer, head = (old.column(c).to_numpy() for c in ("layer", "head_index"))
    n_changes = old.column("n_changes").to_numpy().astype(np.int64)
    first = {
        c: np.array(old.column(f"first_dormant_{c}").to_pylist(), dtype=object) for c in ("step", "tokens", "revision")
    }
    final = None
    for k, matrices in new:
        cells = [(m.score_fn, m.layer, m.head_index) for m in matrices]
        if sum(len(c[1]) for c in cells) != old.num_rows:
            return None
        at = np.concatenate([np.full(len(c[1]), c[0], dtype=object) for c in cells])
        if not ((at == fns).all() and (np.concatenate([c[1] for c in cells]) == layer).all()):
            return None
        if not (np.concatenate([c[2] for c in cells]) == head).all():
            return None
        before = np.concatenate([m.dormant[0] for m in matrices])  # [row] the pair's earlier checkpoint
        after = np.concatenate([m.dormant[-1] for m in matrices])  # [row] the new one
        n_changes += before != after
        c = view.checkpoints[k]
        fresh = after & np.array([r is None for r in first["revision"]])
        for name in ("step", "tokens", "revision"):
            first[name][fresh] = c[name]
        final = (c, after)
    assert final is not None
    c, after = final
    columns = {
        "revision": np.full(old.num_rows, c["revision"], dtype=object),
        "stage": np.full(old.num_rows, c["stage"]),
        "step": np.full(old.num_rows, c["step"]),
        "tokens": np.full(old.num_rows, c["tokens"]),
        "first_dormant_step": first["step"],
        "first_dormant_tokens": first["tokens"],
        "first_dormant_revision": first["revision"],
        "n_changes": n_changes,
        "final_state": np.where(after, "dormant", "active").astype(object),
    }
    out = old
    for name, values in columns.items():
        field = out.schema.field(name)
        out = out.set_column(out.column_names.index(name), field, pa.array(values.tolist(), field.type))
    return out


def _of_pairs(trans: pa.Table, revisions: list[str], kept: list[tuple[str, str]]) -> np.ndarray:
    """[row] whether a row goes between one of the `kept` (from, to) pairs, compared as revision indices: no Python
    object per row (a row naming a revision outside `revisions` is of no kept pair)."""
    at = {r: k for k, r in enumerate(revisions)}
    ends = [
        pc.fill_null(pc.index_in(trans.column(c), value_set=pa.array(revisions, pa.string())), -1).to_numpy()
        for c in ("from_revision", "to_revision")
    ]
    a, b = (np.asarray(e, dtype=np.int64) for e in ends)
    want = np.array([at[x] * len(revisions) + at[y] for x, y in kept], dtype=np.int64)
    return np.isin(a * len(revisions) + b, want) & (a >= 0) & (b >= 0)


def _summary(view: SeriesView, counts: dict[str, int]) -> SeriesSummary:
    return SeriesSummary(len(view.checkpoints), sum(counts.values()), counts, view.n_stale)
