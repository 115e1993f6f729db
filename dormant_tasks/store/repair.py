"""`dormant store repair` and `dormant store gc`: bring a store's files and its manifests back into agreement,
set damaged files aside, and drop kept per-input scores.

The manifest of a series (its `checkpoints` file, see `store`) names the head_scores and input_scores files
of every stored result, with their size and content checksum. What can break the agreement: a file deleted by
hand (the manifest names a file the disk lacks: reads refuse it and name `repair`), a writer killed between a
result's files and its manifest row (files no row names: readers never see them), the manifest deleted by
hand (files that no row names, but results: reads refuse such a series and name `repair`), and a damaged
file (truncated, bytes changed: `damaged_files` finds it; reads refuse it by name and name `repair`).
`repair` fixes them all, holding each series (`hold_series`) from its checks to its last write:
- a damaged file of any table is moved, never deleted, to <store>/_quarantine/<time>/ (same relative path);
- a missing, empty or damaged manifest is rebuilt from the rows its head_scores files keep in their metadata
  (`MANIFEST_ROW_KEY`), with their sizes and checksums; when a file keeps none (written before they did),
  repair refuses and changes nothing;
- a row whose head_scores or input_scores file is damaged, or whose head_scores file is missing, is dropped
  (the next `dormant track` scores that checkpoint again: `RepairResult.dropped`); a row whose input_scores
  file is missing (deleted by hand) keeps its mask, with `input_scores_kept` false;
- a head_scores or input_scores file that no row names is deleted (left by a killed writer).
Derived tables (transitions, histories, agreement) are derived again by the caller (`dormant store repair`,
`dormant track`): they are recomputed from the checkpoints whenever missing, damaged or stale.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dormant_tasks.errors import StoreError
from dormant_tasks.hashing import sha256_file
from dormant_tasks.names import series_slug
from dormant_tasks.store.io import (
    conform,
    damage_of,
    manifest_path,
    read_manifest,
    read_metadata,
    series_ids,
    write_manifest,
)
from dormant_tasks.store.layout import Table, data_files, linked_entries, series_dir, store_folder
from dormant_tasks.store.lock import hold_series
from dormant_tasks.store.parts import GENERATION_KEY, PARTS, all_parts, delete_parts, stale_parts
from dormant_tasks.store.schema import MANIFEST_ROW_KEY, RESULT_TABLES, TABLES, scores_digest
from dormant_tasks.store.sums import (
    SUMS,
    read_sums,
    record_sums,
    recorded_entry,
    sum_mismatch,
    sums_damage,
    sums_path,
)

PARTED = (Table.transitions,)  # derived tables that appends add parts to (`store.parts`)
QUARANTINE = "_quarantine"  # <store>/_quarantine/<UTC time>/<table>/series=<slug>/<file>: damaged files, kept


@dataclass(frozen=True)
class Damage:
    path: Path
    reason: str
    model_id: str  # the series of the file
    table: str


@dataclass
class RepairResult:
    dropped: list[str] = field(default_factory=list)  # "model_id@revision" rows dropped: a file missing/damaged
    unkept: list[str] = field(default_factory=list)  # rows whose input_scores file was missing
    orphans: list[Path] = field(default_factory=list)  # files no manifest row named, deleted
    rebuilt: list[str] = field(default_factory=list)  # "model_id (n results)": manifests rebuilt from their files
    quarantined: list[tuple[Damage, Path]] = field(default_factory=list)  # damaged files and where they went
    bytes_freed: int = 0
    summed: int = 0  # whole files whose checksum was recorded (written before the store kept them)
    digested: int = 0  # results whose scores digest was recorded (`scores_sha256`: rows written before it)
    links: list[Path] = field(default_factory=list)  # symbolic links found there, left alone (never followed)


def _files(root: Path, table: str, model_id: str) -> dict[str, Path]:
    """A series' data files of `table` by file key."""
    return {p.stem: p for p in data_files(root, table, model_id)}


def _with_kept(manifest: pa.Table, kept) -> pa.Table:
    """The manifest with its `input_scores_kept` column replaced."""
    i = manifest.schema.get_field_index("input_scores_kept")
    return manifest.set_column(i, "input_scores_kept", pa.array(kept, pa.bool_()))


def _delete(paths, result: RepairResult) -> None:
    for p in paths:
        result.bytes_freed += p.stat().st_size
        p.unlink()
        result.orphans.append(p)


def damaged_files(store, model_id: str | None = None, verify: bool = True) -> list[Damage]:
    """Every damaged data file of a series (or of every series). Every file: its size against the manifest or the
    store's checksum record (`store.sums`), its footer and columns; the files that no manifest row names (small:
    the manifest, taus, derived tables): their content checksum and page checksums too; with `verify`, the
    result files' as well (every byte of the store read). Reads only."""
    root = store_folder(store)
    return [d for series in ([model_id] if model_id else all_series(root)) for d in _damage(root, series, verify)]


def _damage(root: Path, series: str, verify: bool) -> list[Damage]:
    out = []
    reason = sums_damage(root, series)
    if reason is not None:
        out.append(Damage(sums_path(root, series), reason, series, SUMS))
    sums = read_sums(root, series)
    manifest = manifest_path(root, series)
    recorded: dict[Path, tuple[str | None, int | None]] = {}
    if manifest.is_file() and not manifest.is_symlink():
        reason = sum_mismatch(manifest, recorded_entry(root, sums, manifest)) or damage_of(manifest)
        if reason is not None:
            out.append(Damage(manifest, reason, series, Table.checkpoints))
        else:
            for r in read_manifest(root, series).to_pylist():
                for table in RESULT_TABLES:
                    sha = r[f"{table}_sha256"] if verify else None
                    path = root / table / manifest.parent.name / f"{r['file_key']}.parquet"
                    recorded[path] = (sha, r[f"{table}_bytes"])
    for table in TABLES:
        for path in data_files(root, table, series):
            if path == manifest:
                continue
            if table in RESULT_TABLES:
                reason = damage_of(path, *recorded.get(path, (None, None)), pages=verify)
            else:
                reason = sum_mismatch(path, recorded_entry(root, sums, path)) or damage_of(path)
            if reason is not None:
                out.append(Damage(path, reason, series, table))
    for table in PARTED:  # the parts appends added to a derived file (`store.parts`): checked as the file is
        for path in all_parts(root, table, series):
            reason = sum_mismatch(path, recorded_entry(root, sums, path)) or damage_of(path)
            if reason is not None:
                out.append(Damage(path, reason, series, table))
    return out


def _stale_parts(root: Path, series: str) -> list[Path]:
    """The parts folders no base names (folded into a base since, left by a writer killed before it deleted them;
    or of a base that is gone or damaged): deleted by repair, never read."""
    out = []
    for table in PARTED:
        top = series_dir(root, table, series) / PARTS
        for folder in sorted(top.iterdir()) if top.is_dir() and not top.is_symlink() else ():
            try:
                meta = read_metadata(root, table, series, folder.name) or {}
            except StoreError:
                meta = {}
            out += stale_parts(root, table, series, folder.name, meta.get(GENERATION_KEY))
    return out


def unchecked_files(store, model_id: str | None = None) -> list[Path]:
    """The data files of a series (or of every series) with no recorded checksum: written before the store kept
    them, or added by hand (`dormant store repair` records them once they are found whole)."""
    root = store_folder(store)
    return [p for series in ([model_id] if model_id else all_series(root)) for p in _unchecked(root, series)]


def _unchecked(root: Path, series: str) -> list[Path]:
    sums = read_sums(root, series)
    try:
        rows = read_manifest(root, series).to_pylist()
    except StoreError:  # damaged: `damaged_files` names it
        rows = []
    named = {
        root / table / f"series={series_slug(series)}" / f"{r['file_key']}.parquet"
        for r in rows
        for table in RESULT_TABLES
        if r[f"{table}_sha256"] is not None
    }
    return [
        p
        for table in TABLES
        for p in data_files(root, table, series)
        if p not in named and (table in RESULT_TABLES or recorded_entry(root, sums, p) is None)
    ]


def _record_missing_sums(root: Path, series: str, result: RepairResult) -> None:
    """Checksums for the series' whole files that have none (found whole by `_damage` just before): the result
    files' in their manifest rows, every other file's in the store's record."""
    unchecked = set(_unchecked(root, series))
    if not unchecked:
        return
    manifest = read_manifest(root, series)
    folder = f"series={series_slug(series)}"
    columns = {}
    for table in RESULT_TABLES:
        shas, sizes = manifest.column(f"{table}_sha256").to_pylist(), manifest.column(f"{table}_bytes").to_pylist()
        for i, key in enumerate(manifest.column("file_key").to_pylist()):
            path = root / table / folder / f"{key}.parquet"
            if path in unchecked:
                shas[i], sizes[i] = sha256_file(path), path.stat().st_size
                result.summed += 1
                unchecked.discard(path)
        columns[f"{table}_sha256"], columns[f"{table}_bytes"] = pa.array(shas, pa.string()), pa.array(sizes, pa.int64())
    others = {p: (sha256_file(p), p.stat().st_size) for p in unchecked if p.parents[1].name not in RESULT_TABLES}
    if others:
        record_sums(root, series, others)
        result.summed += len(others)
    if any(c.null_count != manifest.column(n).null_count for n, c in columns.items()):
        for name, column in columns.items():
            manifest = manifest.set_column(manifest.schema.get_field_index(name), name, column)
        write_manifest(root, series, manifest)


def _record_missing_digests(root: Path, series: str, result: RepairResult) -> None:
    """`scores_sha256` for the manifest rows written before it, from their head_scores files (found whole just
    before): status's second net then reads the manifest alone."""
    manifest = read_manifest(root, series)
    digests = manifest.column("scores_sha256").to_pylist()
    if all(digests):
        return
    folder = series_dir(root, Table.head_scores, series)
    for i, key in enumerate(manifest.column("file_key").to_pylist()):
        path = folder / f"{key}.parquet"
        if digests[i] is None and path.is_file():
            digests[i] = scores_digest(pq.read_table(path, columns=["score_fn", "layer", "head_index", "score"]))
            result.digested += 1
    i = manifest.schema.get_field_index("scores_sha256")
    write_manifest(root, series, manifest.set_column(i, manifest.schema.field(i), pa.array(digests, pa.string())))


def _quarantine(root: Path, damage: list[Damage], result: RepairResult) -> None:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    for d in damage:
        target = root / QUARANTINE / stamp / d.path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(d.path, target)
        result.quarantined.append((d, target))


def _manifest(root: Path, series: str, heads: dict[str, Path], inputs: dict[str, Path]) -> tuple[pa.Table, bool]:
    """The series' manifest, or when it is missing or empty while head_scores files exist, the one rebuilt from
    the rows those files keep, with the files' sizes and checksums (True). StoreError when a file keeps none:
    nothing is changed then."""
    manifest = read_manifest(root, series)
    if manifest.num_rows or not heads:
        return manifest, False
    kept = {k: (read_metadata(root, Table.head_scores, series, k) or {}).get(MANIFEST_ROW_KEY) for k in heads}
    old = sorted(k for k, row in kept.items() if row is None)
    if old:
        raise StoreError(
            f"store {str(root)!r}: the manifest of {series} ({manifest_path(root, series).relative_to(root)}) is "
            f"missing, empty or damaged and {len(old)} of its {len(heads)} head_scores files (e.g. {old[0]}.parquet) "
            "were written before these files kept their manifest row, so it cannot be rebuilt; nothing was deleted or moved: "
            "restore the manifest from a backup, or move the series' head_scores and input_scores folders away "
            "and run `dormant track` again"
        )
    rows = [json.loads(row) | {"file_key": k} for k, row in kept.items() if row is not None]
    for r in rows:
        r["analyzed_at"] = datetime.fromisoformat(r["analyzed_at"])
        for table, files in ((Table.head_scores, heads), (Table.input_scores, inputs)):
            path = files.get(r["file_key"])
            if path is not None and (table == Table.head_scores or r.get("input_scores_kept")):
                r[f"{table}_sha256"], r[f"{table}_bytes"] = sha256_file(path), path.stat().st_size
    return conform(rows, Table.checkpoints), True


def repair_store(store, model_id: str | None = None, *, wait: bool = True) -> RepairResult:
    """Set damaged files aside, rebuild lost or damaged manifests, drop manifest rows whose files are gone and
    delete files no row names (every series, or one), holding every series it repairs. A manifest that cannot
    be rebuilt is refused before anything changes."""
    root = store_folder(store)
    result = RepairResult()
    every = [model_id] if model_id else all_series(root)
    with contextlib.ExitStack() as stack:
        for series in every:  # sorted: two repairs take the series in one order
            stack.enter_context(hold_series(root, series, wait=wait))
        damage = {series: _damage(root, series, verify=True) for series in every}
        for series in every:  # refused before anything changes
            bad = {d.path for d in damage[series]}
            heads = {k: p for k, p in _files(root, Table.head_scores, series).items() if p not in bad}
            if manifest_path(root, series) in bad:
                _rebuildable(root, series, heads)
            else:
                _manifest(root, series, heads, {})
        for series in every:
            _quarantine(root, damage[series], result)
            # a damaged input_scores file drops its result too: the rerun scores it again, both files whole
            bad_inputs = {d.path.stem for d in damage[series] if d.table == Table.input_scores}
            heads, inputs = _files(root, Table.head_scores, series), _files(root, Table.input_scores, series)
            manifest, rebuilt = _manifest(root, series, heads, inputs)
            if rebuilt:
                result.rebuilt.append(f"{series} ({manifest.num_rows} results)")
            keys = manifest.column("file_key").to_pylist()
            kept = manifest.column("input_scores_kept").to_pylist()
            present = [k in heads and k not in bad_inputs for k in keys]
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
            stale = _stale_parts(root, series)  # parts no base names: left by a killed writer
            files = [p for folder in stale for p in sorted(folder.glob("*.parquet"))]
            result.orphans += files
            result.bytes_freed += sum(p.stat().st_size for p in files)
            delete_parts(root, series, stale)
            _record_missing_digests(root, series, result)
            _record_missing_sums(root, series, result)  # a damaged record was moved aside: every file's again
            result.links += store_links(root, series)
    return result


def _rebuildable(root: Path, series: str, heads: dict[str, Path]) -> None:
    """StoreError when a damaged manifest could not be rebuilt from `heads` (see `_manifest`)."""
    old = sorted(k for k in heads if MANIFEST_ROW_KEY not in (read_metadata(root, Table.head_scores, series, k) or {}))
    if old:
        raise StoreError(
            f"store {str(root)!r}: the manifest of {series} ({manifest_path(root, series).relative_to(root)}) is "
            f"damaged and {len(old)} of its {len(heads)} head_scores files (e.g. {old[0]}.parquet) were written "
            "before these files kept their manifest row, so it cannot be rebuilt; nothing was deleted or moved: restore "
            "the manifest from a backup, or move the series' head_scores and input_scores folders away and run "
            "`dormant track` again"
        )


def store_links(store, model_id: str | None = None) -> list[Path]:
    """The symbolic links where a series' folders or data files should be (of every table): never followed,
    read, moved or deleted; the commands that walk the store name them."""
    root = Path(store)
    return [
        p
        for series in ([model_id] if model_id else all_series(root))
        for t in TABLES
        for p in linked_entries(root, t, series)
    ]


def all_series(root: Path) -> list[str]:
    return sorted({m for t in TABLES for m in series_ids(root, t)})


@dataclass
class GcResult:
    checkpoints: int = 0  # results whose per-input scores were dropped
    files: int = 0
    bytes_freed: int = 0
    links: list[Path] = field(default_factory=list)  # symbolic links found there, left alone (never followed)


def gc_store(store, model_id: str | None = None, *, wait: bool = True) -> GcResult:
    """Drop the kept per-input scores (every series, or one): the masks stay; `--retau` then rescores."""
    root = store_folder(store)
    result = GcResult()
    for series in [model_id] if model_id else all_series(root):
        with hold_series(root, series, wait=wait):
            manifest = read_manifest(root, series)
            kept = manifest.column("input_scores_kept")
            if pc.any(kept).as_py():
                write_manifest(root, series, _with_kept(manifest, [False] * len(kept)))
            # checkpoints as `dormant status` counts them: a revision scored on two calibration sets is one
            kept_revisions = manifest.filter(pc.fill_null(kept, False)).column("revision").to_pylist()
            result.checkpoints += len(set(kept_revisions))
            for p in _files(root, Table.input_scores, series).values():  # first the manifest, then the files
                result.bytes_freed += p.stat().st_size
                result.files += 1
                p.unlink()
            result.links += linked_entries(root, Table.input_scores, series)
    return result
