"""`dormant store repair` and `dormant store gc`: bring a store's files and its manifests back into agreement,
and drop kept per-input scores.

The manifest of a series (its `checkpoints` file, see `store`) names the head_scores and input_scores files
of every stored result. Two things can break the agreement: a file deleted by hand (the manifest names a
file the disk lacks: reads refuse it and name `repair`), and a writer killed between a result's files and
its manifest row (files no row names: readers never see them). A third, the manifest itself deleted by hand,
leaves files that no row names either, but they are results: reads refuse such a series and name `repair`.
`repair` fixes all three, under `series_lock`:
- a missing or empty manifest is rebuilt from the rows its head_scores files keep in their metadata
  (`MANIFEST_ROW_KEY`); when a file keeps none (written before they did), repair refuses and deletes nothing;
- a row whose head_scores file is missing is dropped (the next `dormant track` scores that checkpoint
  again); a row whose input_scores file is missing keeps its mask, with `input_scores_kept` false;
- a head_scores or input_scores file that no row names is deleted.
Derived tables are left to the next `dormant track`, which notices that the checkpoint pairs changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.errors import StoreError
from dormant_tasks.store.io import (
    MANIFEST_ROW_KEY,
    RESULT_TABLES,
    _data_files,
    _read_manifest,
    _series_ids,
    conform,
    manifest_path,
    open_store,
    read_metadata,
    series_lock,
    write_manifest,
)


@dataclass
class RepairResult:
    dropped: list[str] = field(default_factory=list)  # "model_id@revision" rows dropped: head_scores file missing
    unkept: list[str] = field(default_factory=list)  # rows whose input_scores file was missing
    orphans: list[Path] = field(default_factory=list)  # files no manifest row named, deleted
    rebuilt: list[str] = field(default_factory=list)  # "model_id (n results)": manifests rebuilt from their files
    bytes_freed: int = 0


def _files(root: Path, table: str, model_id: str) -> dict[str, Path]:
    """A series' data files of `table` by file key."""
    return {p.stem: p for p in _data_files(root, table, model_id)}


def _with_kept(manifest: pa.Table, kept) -> pa.Table:
    """The manifest with its `input_scores_kept` column replaced."""
    i = manifest.schema.get_field_index("input_scores_kept")
    return manifest.set_column(i, "input_scores_kept", pa.array(kept, pa.bool_()))


def _delete(paths, result: RepairResult) -> None:
    for p in paths:
        result.bytes_freed += p.stat().st_size
        p.unlink()
        result.orphans.append(p)


def _manifest(root: Path, series: str, heads: dict[str, Path]) -> tuple[pa.Table, bool]:
    """The series' manifest, or when it is missing or empty while head_scores files exist, the one rebuilt from
    the rows those files keep (True). StoreError when a file keeps none: nothing is deleted then."""
    manifest = _read_manifest(root, series)
    if manifest.num_rows or not heads:
        return manifest, False
    kept = {k: (read_metadata(root, "head_scores", series, k) or {}).get(MANIFEST_ROW_KEY) for k in heads}
    old = sorted(k for k, row in kept.items() if row is None)
    if old:
        raise StoreError(
            f"store {str(root)!r}: the manifest of {series} ({manifest_path(root, series).relative_to(root)}) is "
            f"missing or empty and {len(old)} of its {len(heads)} head_scores files (e.g. {old[0]}.parquet) were "
            "written before these files kept their manifest row, so it cannot be rebuilt; nothing was deleted: "
            "restore the manifest from a backup, or move the series' head_scores and input_scores folders away "
            "and run `dormant track` again"
        )
    rows = [json.loads(row) | {"file_key": k} for k, row in kept.items() if row is not None]
    for r in rows:
        r["analyzed_at"] = datetime.fromisoformat(r["analyzed_at"])
    return conform(rows, "checkpoints"), True


def repair_store(store, model_id: str | None = None) -> RepairResult:
    """Rebuild lost manifests, drop manifest rows whose files are gone and delete files no row names (every
    series, or one). A manifest that cannot be rebuilt is refused before anything changes."""
    root = open_store(store)
    result = RepairResult()
    every = [model_id] if model_id else _all_series(root)
    for series in every:
        _manifest(root, series, _files(root, "head_scores", series))
    for series in every:
        with series_lock(root, series):
            heads, inputs = _files(root, "head_scores", series), _files(root, "input_scores", series)
            manifest, rebuilt = _manifest(root, series, heads)
            if rebuilt:
                result.rebuilt.append(f"{series} ({manifest.num_rows} results)")
            keys = manifest.column("file_key").to_pylist()
            kept = manifest.column("input_scores_kept").to_pylist()
            present = [k in heads for k in keys]
            now_kept = [bool(k and key in inputs) for k, key in zip(kept, keys)]
            revisions = manifest.column("revision").to_pylist()
            result.dropped += [f"{series}@{r}" for r, ok in zip(revisions, present) if not ok]
            result.unkept += [
                f"{series}@{r}" for r, ok, k, nk in zip(revisions, present, kept, now_kept) if ok and k != nk
            ]
            if rebuilt or not all(present) or kept != now_kept:
                write_manifest(root, series, _with_kept(manifest, now_kept).filter(pa.array(present, pa.bool_())))
            named = set(k for k, ok in zip(keys, present) if ok)
            named_inputs = set(k for k, ok, nk in zip(keys, present, now_kept) if ok and nk)
            _delete([p for k, p in heads.items() if k not in named], result)
            _delete([p for k, p in inputs.items() if k not in named_inputs], result)
    return result


def _all_series(root: Path) -> list[str]:
    return sorted({m for t in ("checkpoints", *RESULT_TABLES) for m in _series_ids(root, t)})


@dataclass
class GcResult:
    checkpoints: int = 0  # results whose per-input scores were dropped
    files: int = 0
    bytes_freed: int = 0


def gc_store(store, model_id: str | None = None) -> GcResult:
    """Drop the kept per-input scores (every series, or one): the masks stay; `--retau` then rescores."""
    root = open_store(store)
    result = GcResult()
    for series in [model_id] if model_id else _all_series(root):
        with series_lock(root, series):
            manifest = _read_manifest(root, series)
            kept = manifest.column("input_scores_kept")
            if pc.any(kept).as_py():
                write_manifest(root, series, _with_kept(manifest, [False] * len(kept)))
            # checkpoints as `dormant status` counts them: a revision scored on two calibration sets is one
            kept_revisions = manifest.filter(pc.fill_null(kept, False)).column("revision").to_pylist()
            result.checkpoints += len(set(kept_revisions))
            for p in _files(root, "input_scores", series).values():  # first the manifest, then the files
                result.bytes_freed += p.stat().st_size
                result.files += 1
                p.unlink()
    return result
