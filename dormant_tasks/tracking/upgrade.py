"""`dormant store upgrade`, run by the tracking part: the store rewrites its files (`store.upgrade`), then the
derived tables of every older version are derived again, one file per taus and calibration set, and the marker
is written last, so an interrupted upgrade is finished by running it again.

Within version 4 (`refresh_current`, also run on a store already at version 4): a series whose `transitions`
were decided by an older rule than confident states (docs/SCORES.md, "Confidence") is derived again
(`rederive`, its mask changes kept), and `calibration_agreement` rows written before the Jaccard of two empty
masks became undefined get NaN instead of 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dormant_tasks.statistics import FDR
from dormant_tasks.store import (
    DERIVED,
    SCHEMA_VERSION,
    Table,
    convert_store,
    derived_file_key,
    finish_upgrade,
    read_any_version,
    rewrite_file,
    series_to_upgrade,
    table_files,
    write_any_version,
)
from dormant_tasks.tracking.derive import rederive
from dormant_tasks.tracking.transitions import (
    FDR_KEY,
    derive_transitions,
    fdr_record,
    head_histories,
    mark_blips,
    stored_rule,
)


@dataclass(frozen=True)
class UpgradeResult:
    from_version: int
    files_rewritten: int
    series_derived: int


def upgrade_store(path) -> UpgradeResult:
    """Upgrade the store at `path` to the current schema version (on a current store: `refresh_current`)."""
    root, version, rewritten = convert_store(path)
    if version == SCHEMA_VERSION:
        return UpgradeResult(version, refresh_current(root), 0)
    # Derived tables of every older version are derived again, one file per taus and calibration set (v1's
    # lacked taus_id and calibration_id; v3's were one file per taus, without confident/blip).
    before = {p for table in DERIVED for p in table_files(root, table)}
    derived = [_derive_again(root, model_id) for model_id in series_to_upgrade(root)]
    n_series = sum(bool(paths) for paths in derived)
    for p in before - {p for paths in derived for p in paths}:  # the older naming, or taus no checkpoint holds
        p.unlink(missing_ok=True)
    finish_upgrade(root)  # last: until here the store reads as its old version, and a rerun finishes it
    return UpgradeResult(version, rewritten, n_series)


def refresh_current(root: Path) -> int:
    """Bring a version-4 store's derived files up to what this release writes (module docstring); the number
    of files rewritten (0: nothing to do)."""
    rewritten = 0
    for path in table_files(root, Table.calibration_agreement):
        t = pq.read_table(path)
        union = pc.subtract(pc.add(t.column("n_dormant_a"), t.column("n_dormant_b")), t.column("n_both"))
        stale = pc.and_(pc.equal(union, 0), pc.invert(pc.is_nan(t.column("jaccard"))))
        if not pc.any(stale).as_py():
            continue
        i = t.column_names.index("jaccard")
        fixed = pc.if_else(stale, pa.scalar(float("nan")), t.column("jaccard"))  # undefined, not 1
        t = t.set_column(i, t.schema.field(i), fixed)  # the schema's metadata (the agreement record) kept
        rewrite_file(path, t)
        rewritten += 1
    older = set()
    for path in table_files(root, Table.transitions):
        metadata = pq.read_schema(path).metadata or {}
        if stored_rule(metadata.get(FDR_KEY.encode(), b"").decode() or None) is None:
            older.update(pq.read_table(path, columns=["model_id"]).column("model_id").unique().to_pylist())
            rewritten += 1
    for model_id in sorted(older):
        rederive(root, model_id)
    return rewritten


def _derive_again(root: Path, model_id: str) -> list[Path]:
    """Transitions and histories of every (taus_id, calibration_id) of the series' checkpoints."""
    ckpts = read_any_version(root, Table.checkpoints, model_id)
    keys = sorted(set(zip(ckpts.column("taus_id").to_pylist(), ckpts.column("calibration_id").to_pylist())))
    written = []
    for tid, cal in keys:
        mine = ckpts.filter(
            pc.and_(pc.equal(ckpts.column("taus_id"), tid), pc.equal(ckpts.column("calibration_id"), cal))
        )
        heads = read_any_version(root, Table.head_scores, model_id, filters={"taus_id": tid, "calibration_id": cal})
        heads = heads.filter(pc.is_in(heads.column("revision"), mine.column("revision")))
        trans = mark_blips(derive_transitions(heads, mine))
        key = derived_file_key(Table.transitions, tid, cal)
        written.append(write_any_version(root, Table.transitions, trans, key, model_id, {FDR_KEY: fdr_record(FDR)}))
        hist = head_histories(heads, mine)
        written.append(
            write_any_version(
                root, Table.head_histories, hist, derived_file_key(Table.head_histories, tid, cal), model_id
            )
        )
    return written
