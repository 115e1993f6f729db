"""A series as `dormant publish` lays it out: a store of that one series, holding its current results only.

The publication is a store folder (`docs/PUBLISHING.md`), so whatever reads a store reads it: the marker, each
table's `series=<slug>` folder, the checksum record. What it holds:
- the result files (`head_scores`, with `with_inputs` also `input_scores`) of the manifest rows the caller names
  (the series' current checkpoints), byte for byte;
- the manifest, rewritten with those rows only (an input_scores file left out is no longer named);
- the derived tables (`transitions`, `head_histories`) of the (taus, calibration set) pairs the caller names, and
  the series' `taus`, `calibration_agreement`, `failed_checkpoints`, `listed_checkpoints` and `evaluations` files,
  byte for byte (with `with_inputs` also `evaluation_items`);
- further tables of the caller's (the findings), one file each in a folder of their own;
- the marker and the checksum record of every file that no manifest row names.
Every file it writes is a function of the store's bytes alone (no clock, no host, rows in a fixed order), so the
same store gives byte-identical files and a second publication uploads nothing. The `PUBLISHED` record beside
them, written by the publisher, makes the folder read-only to every writer (`layout.refuse_published`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq

from dormant_tasks.errors import StoreError
from dormant_tasks.hashing import sha256_file
from dormant_tasks.store.io import conform, parquet_options
from dormant_tasks.store.layout import (
    MARKER,
    PUBLISHED,
    Table,
    data_files,
    marker_json,
    safe_file_key,
    series_dir,
    store_folder,
)
from dormant_tasks.store.repair import Damage
from dormant_tasks.store.schema import MANIFEST_KEY, RESULT_TABLES, TABLES, derived_file_key
from dormant_tasks.store.sums import sums_json, sums_path
from dormant_tasks.store.upgrade import DERIVED

# Tables published whole (every file of the series); per-input tables only when asked for.
WHOLE = (Table.taus, Table.calibration_agreement, Table.failed_checkpoints, Table.listed_checkpoints, Table.evaluations)
PER_INPUT = (Table.input_scores, Table.evaluation_items)


def parquet_bytes(t: pa.Table) -> bytes:
    """`t` as the store writes a file (`parquet_options`): the same table gives the same bytes."""
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink, **parquet_options(t))
    return sink.getvalue().to_pybytes()


def publication_files(
    store,
    model_id: str,
    results: Sequence[Mapping],
    current: Collection[tuple[str, str]],
    *,
    with_inputs: bool = False,
    tables: Mapping[str, pa.Table] | None = None,
    derived: Mapping[tuple[str, str, str], pa.Table] | None = None,
) -> dict[str, Path | bytes]:
    """The files of `model_id`'s publication, by path in it (POSIX, relative), in path order: a store file to copy
    (its path) or the bytes of one written for it.

    `results`: the manifest rows to publish (the series' current checkpoints, of every calibration set);
    `current`: the (taus_id, calibration_id) pairs whose derived tables to publish; `tables`: further tables by
    folder name (the findings), each one Parquet file; `derived`: {(table, taus_id, calibration_id): contents} to
    publish in place of a stored derived file (transitions whose confident-state decision is pending, decided).
    StoreError when a file the rows name is missing."""
    root = store_folder(store)
    files: dict[str, Path | bytes] = {}

    def rel(path: Path) -> str:
        return path.relative_to(root).as_posix()

    rows = sorted({r["file_key"]: dict(r) for r in results}.values(), key=lambda r: r["file_key"])
    for r in rows:
        keep_inputs = with_inputs and bool(r["input_scores_kept"])
        if not keep_inputs:
            r |= {"input_scores_kept": False, "input_scores_sha256": None, "input_scores_bytes": None}
        for table in (Table.head_scores, Table.input_scores) if keep_inputs else (Table.head_scores,):
            path = series_dir(root, table, model_id) / f"{r['file_key']}.parquet"
            if not path.is_file():
                raise StoreError(
                    f"store {str(root)!r}: the {table} file of {model_id}@{r['revision']} is missing; run `dormant "
                    f"store repair --store {root}`, then publish again"
                )
            files[rel(path)] = path
    manifest = series_dir(root, Table.checkpoints, model_id) / f"{MANIFEST_KEY}.parquet"
    files[rel(manifest)] = parquet_bytes(conform(rows, Table.checkpoints))
    for taus_id, calibration_id in sorted(current):
        for table in DERIVED:
            key = safe_file_key(derived_file_key(table, taus_id, calibration_id))
            path = series_dir(root, table, model_id) / f"{key}.parquet"
            if (table, taus_id, calibration_id) in (derived or {}):
                files[rel(path)] = parquet_bytes((derived or {})[(table, taus_id, calibration_id)])
            elif path.is_file() and not path.is_symlink():
                files[rel(path)] = path
    for table in WHOLE + (PER_INPUT[1:] if with_inputs else ()):
        files |= {rel(p): p for p in data_files(root, table, model_id)}
    for name, t in sorted((tables or {}).items()):
        if name in TABLES:
            raise StoreError(f"a published table may not be named like a store table: {name!r}")
        files[rel(series_dir(root, name, model_id) / f"{name}.parquet")] = parquet_bytes(t)
    named = {rel(series_dir(root, t, model_id) / f"{r['file_key']}.parquet") for r in rows for t in PER_INPUT[:1]}
    named |= {rel(series_dir(root, Table.head_scores, model_id) / f"{r['file_key']}.parquet") for r in rows}
    sums = {path: [list(_digest(content))] for path, content in files.items() if path not in named}
    files[rel(sums_path(root, model_id))] = sums_json(sums)
    files[rel(root / MARKER)] = marker_json()
    return dict(sorted(files.items()))


def _digest(content: Path | bytes) -> tuple[str, int]:
    if isinstance(content, bytes):
        return hashlib.sha256(content).hexdigest(), len(content)
    return sha256_file(content), content.stat().st_size


def publication_listed(store) -> dict[Path, str]:
    """The files a publication's `PUBLISHED` record lists, with the SHA-256 it records for each ({} for a store
    that is no publication, or a record that cannot be read: `publication_damage` names it)."""
    return _record(store_folder(store))[0]


def publication_damage(store, verify: bool = True) -> list[Damage]:
    """Every file a publication's record lists, checked against the SHA-256 recorded there: the card (README.md)
    and the findings table, which no store table holds, included. A file missing or other than recorded is named
    (its model id the record's); none for a store that is no publication. Without `verify`, the per-checkpoint
    result files are left to `damaged_files`' size checks, as a plain `dormant status` reads a store."""
    root = store_folder(store)
    listed, model_id, reason = _record(root)
    if reason is not None:
        return [Damage(root / PUBLISHED, reason, model_id, "")]
    out = []
    for path, sha in listed.items():
        table = path.relative_to(root).parts[0]
        if not verify and table in RESULT_TABLES:
            continue
        if not path.is_file() or path.is_symlink():
            out.append(Damage(path, f"missing, which {PUBLISHED} lists", model_id, table))
        elif sha256_file(path) != sha:
            out.append(Damage(path, f"its SHA-256 is not the one {PUBLISHED} records", model_id, table))
    return out


def _record(root: Path) -> tuple[dict[Path, str], str, str | None]:
    """(the listed files, the series, why the record cannot be read or None) of the publication at `root`."""
    path = root / PUBLISHED
    if not path.is_file():
        return {}, "", None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        files, model_id = dict(record["files"]), str(record["model_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}, "", "not a publication record of dormant-heads"
    rels = {PurePosixPath(p): sha for p, sha in files.items()}
    if any(p.is_absolute() or ".." in p.parts or not isinstance(sha, str) for p, sha in rels.items()):
        return {}, model_id, "not a publication record of dormant-heads (a path outside the store, or no SHA-256)"
    return {root.joinpath(*p.parts): sha for p, sha in rels.items()}, model_id, None
