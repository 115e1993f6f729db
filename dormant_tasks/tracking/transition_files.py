"""A series' transitions as stored: one base file per taus and calibration set, and the parts appends add to it.

Rewriting a series' whole transitions on each append costs its length (200,000 rows at 1,000 checkpoints of
1,024 heads x 15 functions), so an append that adds pairs at the end of the series writes only their rows, as a
part of the base (`store.parts`; `derive_set` decides when). Every PARTS_MAX parts, and whenever the file is
derived whole or its confident-state decision is stored, the parts are folded into a new base. What a reader
gets does not depend on where the rows lie: `read_transitions` returns the base and its parts as one table, in
the order of a whole derivation, with the blips marked over all of it; `transitions_metadata` returns the base's
metadata with the pairs of its parts added (and the decision pending while there are parts: a part's rows were
never decided). The data contract (docs/DATA_CONTRACT.md, "Derived tables") describes the files.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.errors import StoreError
from dormant_tasks.store import (
    GENERATION_KEY,
    Table,
    derived_file_key,
    drop_parts,
    new_generation,
    part_files,
    part_metadata,
    read_metadata,
    read_parts,
    read_table,
    write_part,
    write_table,
)
from dormant_tasks.tracking.transitions import apply_decisions, mark_blips

PARTS_MAX = 32  # parts appended to one base before an append folds them into a new one
PAIRS_KEY = "dormant.pairs"  # transitions/head_histories metadata: the checkpoint pairs they were derived from
DECISION_KEY = "dormant.decision"  # transitions metadata: PENDING while `confident` is not decided (absent: decided)
PENDING = "pending"
COUNTS_KEY = "dormant.counts"  # a base's or part's metadata: its rows per function (JSON), for counts without a read
PARTS_KEY = "dormant.parts"  # in a record only (`transitions_metadata`), never stored: how many parts the base has
RECORD_ONLY = (PARTS_KEY, GENERATION_KEY)  # kept out of a file written for another store (`publish`)


def transitions_key(view) -> str:
    """The file key of a view's transitions (one base per taus and calibration set)."""
    return derived_file_key(Table.transitions, view.taus_id, view.calibration_id)


def _base_metadata(view) -> dict[str, str]:
    return read_metadata(view.store, Table.transitions, view.model_id, transitions_key(view)) or {}


def _parts(view, base: dict[str, str]) -> list:
    return part_files(view.store, Table.transitions, view.model_id, transitions_key(view), base.get(GENERATION_KEY))


def transitions_metadata(view) -> dict[str, str]:
    """The metadata of a view's transitions ({} when there is none): its base's, with the pairs and counts of the
    base's parts added, the decision pending while there are parts, and PARTS_KEY their number."""
    base = _base_metadata(view)
    parts = _parts(view, base)
    if not parts:
        return base
    pairs = set(json.loads(base.get(PAIRS_KEY, "[]")))
    counts = stored_counts(base)
    for path in parts:
        meta = part_metadata(view.store, path)
        pairs |= set(json.loads(meta.get(PAIRS_KEY, "[]")))
        more = stored_counts(meta)
        counts = None if counts is None or more is None else added_counts(counts, more)
    record = base | {PAIRS_KEY: json.dumps(sorted(pairs)), DECISION_KEY: PENDING, PARTS_KEY: str(len(parts))}
    if counts is None:
        record.pop(COUNTS_KEY, None)
    else:
        record[COUNTS_KEY] = counts_json(counts)
    return record


def read_transitions(view, score_fns=None) -> pa.Table:
    """Every stored transition of the view's taus and calibration set (of some functions): the base's rows and its
    parts', as one table in the order of a whole derivation (`in_series_order`), blips marked over all of it and,
    where there are parts, `confident` undecided (`transitions_metadata` says the decision is pending)."""
    filters: dict[str, str | list] = {"taus_id": view.taus_id, "calibration_id": view.calibration_id}
    if score_fns is not None:
        filters["score_fn"] = list(score_fns)
    for _ in range(3):  # a writer folding the parts meanwhile: read again
        base = _base_metadata(view)
        parts = _parts(view, base)
        t = read_table(view.store, Table.transitions, model_id=view.model_id, filters=filters)
        if not parts:
            return t
        try:
            rows = read_parts(view.store, Table.transitions, parts, filters)
        except StoreError:
            if all(p.is_file() for p in parts):
                raise
            continue
        if _base_metadata(view).get(GENERATION_KEY) != base.get(GENERATION_KEY):
            continue
        whole = in_series_order(pa.concat_tables([t, rows]), view.revisions)
        return mark_blips(apply_decisions(whole, {}))
    raise StoreError(
        f"the transitions of {view.model_id} changed three times while being read (a `dormant track` is writing "
        "them); run this again when it is done"
    )


def counts_of(trans: pa.Table) -> dict[str, int]:
    """Rows per function, counted in Arrow (no Python object per row)."""
    if not trans.num_rows:
        return {}
    counts = pc.value_counts(trans.column("score_fn"))
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))


def added_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Rows per function of two files together."""
    return {f: a.get(f, 0) + b.get(f, 0) for f in a | b}


def counts_json(counts: dict[str, int]) -> str:
    return json.dumps(dict(sorted(counts.items())))


def stored_counts(meta: dict[str, str]) -> dict[str, int] | None:
    """The rows per function a file's (or record's) metadata keeps; None when it keeps none (an older file)."""
    try:
        counts = json.loads(meta[COUNTS_KEY])
    except (KeyError, ValueError):
        return None
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else None


def write_whole(view, trans: pa.Table, metadata: dict[str, str]) -> None:
    """Write a view's transitions as one base (a new generation, its counts kept) and delete every part of an
    older one; hold `series_lock`."""
    key = transitions_key(view)
    generation = new_generation()
    meta = {k: v for k, v in metadata.items() if k not in RECORD_ONLY}
    meta |= {GENERATION_KEY: generation, COUNTS_KEY: counts_json(counts_of(trans))}
    write_table(view.store, Table.transitions, trans, file_key=key, model_id=view.model_id, metadata=meta)
    drop_parts(view.store, Table.transitions, view.model_id, key, keep=generation)


def append_part(view, rows: pa.Table, pairs: list[str], metadata: dict[str, str]) -> None:
    """Append the rows of new checkpoint `pairs` to a view's transitions as a part of its base's generation; hold
    `series_lock`. The base must have a generation (`can_append`)."""
    generation = _base_metadata(view)[GENERATION_KEY]
    meta = {k: v for k, v in metadata.items() if k not in RECORD_ONLY}
    meta |= {PAIRS_KEY: json.dumps(sorted(pairs)), COUNTS_KEY: counts_json(counts_of(rows))}
    write_part(
        view.store,
        Table.transitions,
        rows,
        file_key=transitions_key(view),
        generation=generation,
        model_id=view.model_id,
        metadata=meta,
    )


def can_append(record: dict[str, str]) -> bool:
    """Whether a transitions file (its record) takes one more part: it has a generation and fewer than PARTS_MAX."""
    return bool(record.get(GENERATION_KEY)) and int(record.get(PARTS_KEY, "0")) < PARTS_MAX


def in_series_order(trans: pa.Table, revisions: list[str]) -> pa.Table:
    """The row order of `derive_transitions` over the whole series: score_fn, then checkpoint, then head.

    Sorted on one int64 key per row (no string comparisons), and assembled from the runs of rows already in
    order where there are few (an append: per function its stored rows, then the new ones) instead of moving every
    row: the same table, at the cost of a copy rather than a gather of each column."""
    to_rank = pc.index_in(trans.column("to_revision"), value_set=pa.array(revisions, pa.string()))
    fn_code, n_fns = sorted_codes(trans.column("score_fn"))  # [row] its function's place in sorted order
    layer, head = (np.asarray(trans.column(c), dtype=np.int64) for c in ("layer", "head_index"))
    radix = [n_fns, len(revisions), int(layer.max(initial=0)) + 1, int(head.max(initial=0)) + 1]
    if to_rank.null_count or min(layer.min(initial=0), head.min(initial=0)) < 0 or np.prod(radix, dtype=float) >= 2**62:
        keyed = trans.append_column("_rank", to_rank)  # a revision outside the series, or keys too wide: Arrow's sort
        keyed = keyed.sort_by(
            [("score_fn", "ascending"), ("_rank", "ascending"), ("layer", "ascending"), ("head_index", "ascending")]
        )
        return keyed.drop_columns(["_rank"])
    key = ((fn_code * radix[1] + np.asarray(to_rank, np.int64)) * radix[2] + layer) * radix[3] + head
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.diff(order, prepend=-2) != 1)  # where a run of consecutive stored rows begins
    if len(starts) > 64 + trans.num_rows // 1024:
        return trans.take(order)
    ends = np.append(starts[1:], len(order))
    return pa.concat_tables([trans.slice(int(order[a]), int(b - a)) for a, b in zip(starts, ends)] or [trans])


def sorted_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """[row] int64 codes ranked as the strings sort (code k: the k-th distinct value in sorted order), and how many
    distinct values: a string column as an integer sort key."""
    encoded = column.combine_chunks().dictionary_encode()
    names = encoded.dictionary.to_pylist()
    rank = np.empty(len(names), dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return rank[encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)], len(names)
