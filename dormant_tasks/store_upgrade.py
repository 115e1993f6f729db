"""`dormant store upgrade`: rewrite a store of schema version 1 as version 2, in place.

Version 2 (docs/DATA_CONTRACT.md, "Changes from schema version 1"): `head` -> `head_index` everywhere,
`input_scores.value` -> `score`, `evaluations.pct_zeroed` (0-100) -> `frac_zeroed` (0-1) and accuracies
as fractions, `request_id` on checkpoints and evaluations (null for rows written before requests were
saved), and `transitions`/`head_histories` carrying `taus_id` and `calibration_id`; those two tables are
derived again from head_scores, once per stored taus_id.

Every file is rewritten atomically and the marker last, so an interrupted upgrade leaves a store that
this command finishes when run again (files already in the new layout are left as they are).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import StoreError
from .store import (
    SCHEMA_VERSION,
    SCHEMAS,
    atomic_file,
    conform,
    list_models,
    open_store,
    read_table,
    store_version,
    write_marker,
    write_table,
)
from .transitions import derive_transitions, head_histories

_RENAMES = {"head": "head_index", "value": "score", "pct_zeroed": "frac_zeroed"}
_PERCENT_COLUMNS = ("frac_zeroed", "accuracy", "base_accuracy")  # v1 stored these in %
_CONVERTED = ("checkpoints", "head_scores", "input_scores", "taus", "evaluations")
_DERIVED = ("transitions", "head_histories")


@dataclass(frozen=True)
class UpgradeResult:
    from_version: int
    files_rewritten: int
    series_derived: int


def upgrade_store(path) -> UpgradeResult:
    """Upgrade the store at `path` to SCHEMA_VERSION (a no-op for a current store)."""
    root = open_store(path, allow_old=True)
    version = store_version(root)
    if version == SCHEMA_VERSION:
        return UpgradeResult(version, 0, 0)
    if version != 1:
        raise StoreError(
            f"store {str(root)!r} has schema_version {version!r}; `dormant store upgrade` upgrades "
            f"version 1 to {SCHEMA_VERSION} only"
        )
    rewritten = sum(_convert_file(p, table) for table in _CONVERTED for p in _files(root, table))
    derived_files = [p for table in _DERIVED for p in _files(root, table)]
    write_marker(root)  # the converted tables read as version 2 from here on
    n_series = 0
    for model_id in list_models(root):
        n_series += _derive_again(root, model_id)
    for p in derived_files:  # v1 derived files whose taus no checkpoint holds any more
        if p.is_file() and "taus_id" not in pq.read_schema(p).names:
            p.unlink()
    return UpgradeResult(version, rewritten, n_series)


def _files(root: Path, table: str) -> list[Path]:
    return sorted(p for p in (root / table).glob("series=*/*.parquet") if not p.name.startswith((".", "_")))


def _convert_file(path: Path, table: str) -> bool:
    """Rewrite one v1 file in the v2 layout; False when it already is in it."""
    t = pq.read_table(path)
    if t.schema.names == SCHEMAS[table].names:
        return False
    percent = "pct_zeroed" in t.column_names  # v1 evaluations: rescale once, on the renamed columns
    t = t.rename_columns([_RENAMES.get(c, c) for c in t.column_names])
    if percent:
        for name in _PERCENT_COLUMNS:
            i = t.column_names.index(name)
            t = t.set_column(i, name, pc.divide(t.column(name).cast(pa.float64()), 100.0))
    if "series" in t.column_names:
        t = t.drop_columns(["series"])
    t = conform(t, table)
    with atomic_file(path) as f:
        pq.write_table(t, f)
    return True


def _derive_again(root: Path, model_id: str) -> int:
    """Transitions and histories of every (taus_id, calibration_id) of the series' checkpoints."""
    ckpts = read_table(root, "checkpoints", model_id=model_id)
    keys = sorted(set(zip(ckpts.column("taus_id").to_pylist(), ckpts.column("calibration_id").to_pylist())))
    for tid, cal in keys:
        mine = ckpts.filter(
            pc.and_(pc.equal(ckpts.column("taus_id"), tid), pc.equal(ckpts.column("calibration_id"), cal))
        )
        heads = read_table(root, "head_scores", model_id=model_id, filters={"taus_id": tid, "calibration_id": cal})
        heads = heads.filter(pc.is_in(heads.column("revision"), mine.column("revision")))
        write_table(
            root, "transitions", derive_transitions(heads, mine), file_key=f"transitions-{tid}", model_id=model_id
        )
        write_table(
            root, "head_histories", head_histories(heads, mine), file_key=f"head_histories-{tid}", model_id=model_id
        )
    return 1 if keys else 0
