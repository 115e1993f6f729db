"""Agreement between a series' calibration sets: do its dormant heads depend on the input text?

A series tracked on several calibration sets (`dormant track --calibration A --calibration B ...`) has one
dormancy mask per (checkpoint, score function, set), each the set's CURRENT one (its own `SeriesView`). The
`calibration_agreement` table (docs/DATA_CONTRACT.md) compares them: one row per checkpoint present in at
least two sets, score function that those sets share, and ordered pair of sets (`calibration_a` before
`calibration_b` in the series' set order, `SeriesView.calibration_ids`), with the sizes of both masks, of
their intersection and the Jaccard index |A n B| / |A u B| (NaN when both masks are empty: the index is
undefined there, and counting it as 1 would inflate the agreement of functions that mark nothing); and, over every set scored under the function at that checkpoint,
how many heads are dormant on all of them and on at least one.

Incremental, like the transitions (`tracker.derive_set`): the table is one file per series whose Parquet
metadata (key `dormant.agreement`) records, per revision, the manifest ids (file_key@analyzed_at) of its
sets' results. `update_agreement` keeps the rows of revisions whose record is unchanged, reads the
head_scores of the new or changed revisions only (four columns) and writes nothing when nothing changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.engine import ALL_IDS
from dormant_tasks.errors import StoreError
from dormant_tasks.store import SCHEMAS, Table, conform, read_metadata, read_table, series_lock, write_table
from dormant_tasks.tracking.results import result_id
from dormant_tasks.tracking.series import SeriesView, checkpoint_sort_key, open_views

AGREEMENT_FILE = "calibration_agreement"  # the one file of the table per series
AGREEMENT_KEY = "dormant.agreement"  # its metadata: {"sets": [...], "revisions": {revision: "id|id|..."}}
CHUNK = 64  # revisions whose head_scores are read (and compared) at once
_COLUMNS = ["revision", "score_fn", "layer", "head_index", "dormant"]


def agreement_record(views: Sequence[SeriesView]) -> dict:
    """What the agreement is derived from: the sets in order and, per revision present in >= 2 sets, the
    joined manifest ids of its results on those sets (in set order)."""
    ids: dict[str, list[str]] = {}
    for view in views:
        for c in view.checkpoints:
            ids.setdefault(c["revision"], []).append(result_id(c))
    revisions = {rev: "|".join(parts) for rev, parts in ids.items() if len(parts) >= 2}
    return {"sets": [v.calibration_id for v in views], "revisions": revisions}


def set_agreement(store, model_id: str) -> pa.Table:
    """The `calibration_agreement` rows of a series, computed from scratch (empty with fewer than 2 sets)."""
    views = open_views(store, model_id)
    return _compute(views, _series_revisions(views, agreement_record(views)["revisions"]))


def stored_agreement(store, model_id: str) -> pa.Table:
    """The series' `calibration_agreement` rows as stored or, for a series tracked before the table existed,
    computed (`set_agreement`, not stored): what its report shows."""
    table = read_table(store, Table.calibration_agreement, model_id)
    return table if table.num_rows else set_agreement(store, model_id)


def update_agreement(store, model_id: str, views: Sequence[SeriesView] | None = None) -> int:
    """Bring the series' `calibration_agreement` file up to date; the number of revisions (re)computed.

    A series with fewer than 2 calibration sets is left alone (no file). Nothing is read beyond the manifest
    and the file's metadata, and nothing written, when no revision's record changed. `views`: the series'
    `open_views`, when the caller has them already.
    """
    views = open_views(store, model_id) if views is None else list(views)
    if len(views) < 2:
        return 0
    record = agreement_record(views)
    try:
        stored = json.loads(
            (read_metadata(store, Table.calibration_agreement, model_id, AGREEMENT_FILE) or {}).get(
                AGREEMENT_KEY, "null"
            )
        )
        kept = (
            read_table(store, Table.calibration_agreement, model_id=model_id) if stored != record and stored else None
        )
    except StoreError:  # a damaged file: computed again whole, which replaces it
        stored = kept = None
    if stored == record:
        return 0
    old = stored["revisions"] if stored and kept is not None and stored.get("sets") == record["sets"] else {}
    same = {rev for rev, ids in record["revisions"].items() if old.get(rev) == ids}
    todo = _series_revisions(views, [r for r in record["revisions"] if r not in same])
    parts = [_compute(views, todo)]
    if same and kept is not None:
        parts.append(kept.filter(pc.is_in(kept.column("revision"), value_set=pa.array(sorted(same), pa.string()))))
    table = _ordered(pa.concat_tables(parts), views)
    with series_lock(store, model_id):
        write_table(
            store,
            Table.calibration_agreement,
            table,
            file_key=AGREEMENT_FILE,
            model_id=model_id,
            metadata={AGREEMENT_KEY: json.dumps(record)},
        )
    return len(todo)


# ------------------------------------------------------------------------------------------ computing


def _checkpoint_rows(views: Sequence[SeriesView]) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for view in views:
        for c in view.checkpoints:
            rows.setdefault(c["revision"], c)
    return rows


def _series_revisions(views: Sequence[SeriesView], revisions) -> list[str]:
    """`revisions` in the series order."""
    rows = _checkpoint_rows(views)
    return sorted(revisions, key=lambda r: checkpoint_sort_key(rows[r]))


def _fn_order(fns) -> list[str]:
    return sorted(set(fns), key=lambda f: (ALL_IDS.index(f) if f in ALL_IDS else len(ALL_IDS), f))


def _ordered(table: pa.Table, views: Sequence[SeriesView]) -> pa.Table:
    """Rows in series order of the revision, then score function (the paper's order), then pair of sets."""
    rows = _checkpoint_rows(views)
    rank = {r: i for i, r in enumerate(sorted(rows, key=lambda r: checkpoint_sort_key(rows[r])))}
    fns = {f: i for i, f in enumerate(_fn_order(table.column("score_fn").to_pylist()))}
    sets = {v.calibration_id: i for i, v in enumerate(views)}
    keys = list(
        zip(
            (rank[r] for r in table.column("revision").to_pylist()),
            (fns[f] for f in table.column("score_fn").to_pylist()),
            (sets[a] for a in table.column("calibration_a").to_pylist()),
            (sets[b] for b in table.column("calibration_b").to_pylist()),
        )
    )
    order = sorted(range(table.num_rows), key=keys.__getitem__)
    return table.take(pa.array(order, pa.int64()))


def _compute(views: Sequence[SeriesView], revisions: list[str]) -> pa.Table:
    """The agreement rows of `revisions` (in series order), reading those checkpoints' head_scores only."""
    if len(views) < 2 or not revisions:
        return SCHEMAS[Table.calibration_agreement].empty_table()
    rows = _checkpoint_rows(views)
    n_heads = max(int(c["n_heads"]) for c in rows.values())
    n_cells = max(int(c["n_layers"]) for c in rows.values()) * n_heads
    fns = _fn_order(f for v in views for f in v.taus)
    parts = []
    for start in range(0, len(revisions), CHUNK):
        chunk = revisions[start : start + CHUNK]
        parts.append(_compute_chunk(views, chunk, fns, rows, n_heads, n_cells))
    return pa.concat_tables(parts)


def _compute_chunk(views, revisions: list[str], fns: list[str], rows: dict, n_heads: int, n_cells: int) -> pa.Table:
    V, R, F = len(views), len(revisions), len(fns)
    scored = np.zeros((V, R, F, n_cells), dtype=bool)  # [set, revision, fn, head]
    dormant = np.zeros((V, R, F, n_cells), dtype=bool)  # [set, revision, fn, head]
    rev_values, fn_values = pa.array(revisions, pa.string()), pa.array(fns, pa.string())
    for v, view in enumerate(views):
        tracked = set(view.revisions)
        mine = [r for r in revisions if r in tracked]
        if not mine:
            continue
        t = view.head_scores(score_fns=list(view.taus), revisions=mine, columns=_COLUMNS)
        if t.num_rows == 0:
            continue
        r = pc.index_in(t.column("revision"), value_set=rev_values).to_numpy()
        f = pc.index_in(t.column("score_fn"), value_set=fn_values).to_numpy()
        h = t.column("layer").to_numpy().astype(np.int64) * n_heads + t.column("head_index").to_numpy()
        scored[v, r, f, h] = True
        dormant[v, r, f, h] = t.column("dormant").to_numpy(zero_copy_only=False).astype(bool)
    present = np.asarray(scored.any(axis=3))  # [set, revision, fn]
    n_sets = present.sum(axis=0)  # [revision, fn]
    all_ = (dormant | ~present[..., None]).all(axis=0) & (n_sets >= 2)[..., None]  # [revision, fn, head]
    n_all, n_any = all_.sum(axis=2), dormant.any(axis=0).sum(axis=2)  # [revision, fn]
    n_dormant = dormant.sum(axis=3)  # [set, revision, fn]
    out: dict[str, list] = {name: [] for name in SCHEMAS[Table.calibration_agreement].names}
    for i, rev in enumerate(revisions):
        c = rows[rev]
        for j, fn in enumerate(fns):
            for a in range(V):
                for b in range(a + 1, V):
                    if not (present[a, i, j] and present[b, i, j]):
                        continue
                    both = int((dormant[a, i, j] & dormant[b, i, j]).sum())
                    union = int(n_dormant[a, i, j] + n_dormant[b, i, j]) - both
                    values = {
                        "model_id": c["model_id"],
                        "revision": rev,
                        "stage": c["stage"],
                        "step": c["step"],
                        "tokens": c["tokens"],
                        "score_fn": fn,
                        "calibration_a": views[a].calibration_id,
                        "calibration_b": views[b].calibration_id,
                        "n_heads": int((scored[a, i, j] & scored[b, i, j]).sum()),
                        "n_dormant_a": int(n_dormant[a, i, j]),
                        "n_dormant_b": int(n_dormant[b, i, j]),
                        "n_both": both,
                        "jaccard": both / union if union else float("nan"),  # undefined: no head dormant on either
                        "n_sets": int(n_sets[i, j]),
                        "n_dormant_all": int(n_all[i, j]),
                        "n_dormant_any": int(n_any[i, j]),
                    }
                    for name, value in values.items():
                        out[name].append(value)
    return conform(
        pa.table(out) if out["revision"] else SCHEMAS[Table.calibration_agreement].empty_table(),
        Table.calibration_agreement,
    )
