"""Appended parts of a derived file: what an append adds to a series' transitions without rewriting them.

A derived file (`<table>/series=<slug>/<key>.parquet`, the base) records a generation (GENERATION_KEY in its
metadata, a fresh token each time it is written whole). An append writes its new rows as a part of that
generation, `<table>/series=<slug>/_parts/<key>/<generation>/<n>.parquet` (n = 1, 2, ... in order), through the
store's one checked write path (`store.sums`), so its cost is that of its own rows whatever the series' length.
A reader reads the base and the parts of the base's generation; parts of any other generation were folded into a
base since (or belong to one that is gone) and are never read: `drop_parts` deletes them, and so does the next
write of the base. Readers ignore "_" folders (`layout.data_files`), so the parts are never read as the table.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dormant_tasks.atomic import sweep_dead_temps, write_errors
from dormant_tasks.errors import StoreError
from dormant_tasks.store.io import (
    _filter_expression,
    _read_failure,
    _series_of,
    check_sums,
    conform,
    parquet_options,
    read_files,
    refuse_links,
)
from dormant_tasks.store.layout import PARTS, _is_data_file, safe_file_key, series_dir, store_folder
from dormant_tasks.store.schema import table_schema
from dormant_tasks.store.sums import forget_sums, write_parquet

GENERATION_KEY = "dormant.generation"  # a base's metadata: the token its parts name (absent: it has none)


def new_generation() -> str:
    """A fresh generation token for a base about to be written whole."""
    return secrets.token_hex(8)


def _parts_dir(root: Path, table: str, model_id: str, file_key: str) -> Path:
    return series_dir(root, table, model_id) / PARTS / safe_file_key(file_key)


def part_files(store, table: str, model_id: str, file_key: str, generation: str | None) -> list[Path]:
    """The parts of one generation of a base, in the order they were appended (none when `generation` is None)."""
    if not generation:
        return []
    folder = _parts_dir(store_folder(store), table, model_id, file_key) / safe_file_key(generation)
    if not folder.is_dir() or folder.is_symlink():
        return []
    files = [p for p in folder.iterdir() if _is_data_file(p) and p.stem.isdigit() and not p.is_symlink()]
    return sorted(files, key=lambda p: int(p.stem))


def stale_parts(store, table: str, model_id: str, file_key: str, generation: str | None) -> list[Path]:
    """The parts folders of a base's other generations (folded into a base since, or of one that is gone)."""
    folder = _parts_dir(store_folder(store), table, model_id, file_key)
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name != safe_file_key(generation or ""))


def all_parts(root: Path, table: str, model_id: str) -> list[Path]:
    """Every part file of a series' table, of any base and generation (repair's checks, in a store folder checked)."""
    top = series_dir(root, table, model_id) / PARTS
    if not top.is_dir() or top.is_symlink():
        return []
    return sorted(p for p in top.glob("*/*/*.parquet") if _is_data_file(p) and not p.is_symlink())


def write_part(
    store,
    table: str,
    data: pa.Table,
    *,
    file_key: str,
    generation: str,
    model_id: str,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Append `data` as the next part of the base `file_key`'s `generation` (hold `series_lock`); its path."""
    root = store_folder(store)
    t = conform(data, table)
    series = _series_of(t, table, model_id)
    if metadata:
        t = t.replace_schema_metadata({str(k): str(v) for k, v in metadata.items()})
    folder = _parts_dir(root, table, series, file_key) / safe_file_key(generation)
    have = part_files(root, table, series, file_key, generation)
    final = folder / f"{int(have[-1].stem) + 1 if have else 1}.parquet"
    refuse_links(root, final)
    with write_errors(folder):
        folder.mkdir(parents=True, exist_ok=True)
    sweep_dead_temps(folder)
    write_parquet(root, series, final, t, parquet_options(t))
    return final


def read_parts(store, table: str, paths: list[Path], filters=None, columns=None) -> pa.Table:
    """The rows of some parts (checked), as `read_table` reads the table's files."""
    check_sums(store_folder(store), paths)
    schema = table_schema(table)
    return read_files(paths, schema, _filter_expression(filters, schema), columns)


def part_metadata(store, path: Path) -> dict[str, str]:
    """A part's own metadata (its pairs, its counts): read from its footer, checked against its recorded sum."""
    check_sums(store_folder(store), [path])
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException) as e:
        raise _read_failure([path], e) from None
    return {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW")}


def drop_parts(store, table: str, model_id: str, file_key: str, keep: str | None = None) -> int:
    """Delete a base's parts of every generation but `keep` (hold `series_lock`), and their recorded sums; how
    many part files went."""
    return delete_parts(store, model_id, stale_parts(store, table, model_id, file_key, keep))


def delete_parts(store, model_id: str, folders: list[Path]) -> int:
    """Delete parts folders of a series (`stale_parts`) and their recorded sums; how many part files went."""
    root = store_folder(store)
    files = [p for folder in folders for p in folder.glob("*.parquet")]
    for folder in folders:
        try:
            shutil.rmtree(folder)
        except OSError as e:
            raise StoreError(f"cannot delete {str(folder)!r}: {e.strerror}; fix its permissions") from None
    if files:
        forget_sums(root, model_id, files)
    return len(files)
