"""Writes and reads of the Parquet store's tables (layout: `store/layout.py`, schemas: `store/schema.py`).

The `checkpoints` table is the manifest of a series (schema version 4): one file per series, rewritten
atomically, one row per stored result, whose `file_key` names that result's head_scores (and, when
`input_scores_kept`, input_scores) file. A result exists when, and only when, its row is in the manifest:
- `commit_checkpoint` writes the result's files first, then rewrites the manifest with its row, all under
  `series_lock`: a killed writer leaves at most files that no row names, which readers never see
  (`dormant store repair` deletes them);
- reads of head_scores/input_scores open only the files the manifest names, pruned by the filters on the
  columns the manifest shares (revision, step, taus_id, ...): no glob, no footer scan, no dedupe pass;
- a manifest row whose file is missing (deleted by hand) is a StoreError that names the fix
  (`dormant store repair`, which drops such rows so that the next `dormant track` scores them again), and so
  is a series with head_scores files but no manifest (deleted by hand: `check_manifest`;
  each head_scores file keeps its manifest row in its metadata, `MANIFEST_ROW_KEY`, and repair rebuilds from it);
- a result with the same `CheckpointKey` replaces the older row (the newer `analyzed_at` wins; its files
  have the same `file_key`); results of the same revision under other taus stay (`SeriesView` counts them
  stale); of several rows of one revision, calibration set and taus, reads take the newest.

Every file is written to a hidden temp file in its destination folder and renamed over its final name
(`os.replace`), so a reader sees either no file or a whole one; a temp file left by a killed writer is
hidden from readers and swept by the next write to that series folder from the same host.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from dormant_tasks.atomic import atomic_file, sweep_dead_temps, write_errors
from dormant_tasks.errors import USER_ERRNOS, StoreError, did_you_mean
from dormant_tasks.hashing import sha256_file
from dormant_tasks.names import model_id_of_slug
from dormant_tasks.store.layout import (
    MARKER,
    Table,
    damage_fix,
    data_files,
    safe_file_key,
    series_dir,
    store_folder,
    store_root_of,
)
from dormant_tasks.store.lock import series_lock
from dormant_tasks.store.schema import (
    CHECKPOINT_KEY_COLUMNS,
    MANIFEST_KEY,
    MANIFEST_ROW_KEY,
    NOISY_FLOATS,
    RESULT_GROUP,
    RESULT_TABLES,
    SCHEMAS,
    TABLES,
    CheckpointKey,
    checkpoint_file_key,
    scores_digest,
    table_schema,
)
from dormant_tasks.store.sums import read_sums, recorded_entry, sum_mismatch, write_parquet


def list_models(store) -> list[str]:
    """Model ids with at least one file in any table, sorted."""
    root = store_folder(store)
    slugs = {p.parent.name.removeprefix("series=") for t in TABLES for p in data_files(root, t, None)}
    return sorted(model_id_of_slug(s) for s in slugs)


# ---------------------------------------------------------------------------------------------- writes


def _from_rows(rows: list[dict], table: str) -> pa.Table:
    if not rows:
        return table_schema(table).empty_table()
    names = list(dict.fromkeys(k for r in rows for k in r))  # every key of any row, first-seen order
    columns = {}
    for name in names:
        try:
            columns[name] = pa.array([r.get(name) for r in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise StoreError(
                f"table {table!r}: column {name!r} has values of mixed or unsupported types ({e})"
            ) from None
    return pa.table(columns)


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    if pa.types.is_null(src) or src == dst:
        return True
    if pa.types.is_integer(dst):
        return pa.types.is_integer(src)
    if pa.types.is_floating(dst):
        return pa.types.is_integer(src) or pa.types.is_floating(src)
    if pa.types.is_string(dst):
        return pa.types.is_string(src) or pa.types.is_large_string(src) or pa.types.is_dictionary(src)
    if pa.types.is_timestamp(dst):
        return pa.types.is_timestamp(src) and src.tz is not None
    if pa.types.is_list(dst):  # e.g. checkpoints.input_clusters: Python ints arrive as list<int64>
        return (pa.types.is_list(src) or pa.types.is_large_list(src)) and _castable(src.value_type, dst.value_type)
    return False


def conform(data: pa.Table | list[dict], table: str) -> pa.Table:
    """`data` cast to SCHEMAS[table]; StoreError naming any missing, unknown, null or mistyped column."""
    schema = table_schema(table)
    t = _from_rows(data, table) if isinstance(data, list) else data
    if not isinstance(t, pa.Table):
        raise StoreError(f"table {table!r}: expected a pyarrow Table or a list of dicts, got {type(data).__name__}")
    unknown = [c for c in t.column_names if c not in schema.names]
    if unknown:
        raise StoreError(
            f"table {table!r} has no column {unknown[0]!r}{did_you_mean(unknown[0], schema.names)}; "
            f"its columns: {', '.join(schema.names)}"
        )
    arrays = []
    for field in schema:
        if field.name not in t.column_names:
            if field.nullable:
                arrays.append(pa.nulls(t.num_rows, field.type))
                continue
            raise StoreError(f"table {table!r}: missing column {field.name!r} ({field.type}); add it to every row")
        col = t.column(field.name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if not _castable(col.type, field.type):
            hint = " (use timezone-aware UTC datetimes)" if pa.types.is_timestamp(field.type) else ""
            raise StoreError(f"table {table!r}: column {field.name!r} has type {col.type}, expected {field.type}{hint}")
        if col.null_count and not field.nullable:
            raise StoreError(
                f"table {table!r}: column {field.name!r} has {col.null_count} null value(s); it needs a value in every row"
            )
        try:
            arrays.append(col.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise StoreError(f"table {table!r}: column {field.name!r} does not fit {field.type} ({e})") from None
    return pa.Table.from_arrays(arrays, schema=schema)


def write_table(
    store,
    table: str,
    data: pa.Table | list[dict],
    *,
    file_key: str,
    model_id: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write one file of `table` atomically and return its path; an existing file with the same key is replaced.

    All rows must share one model_id; `model_id` names the series for an empty table (and, when given,
    must match the rows). The store is created on the first write. `metadata`: string pairs kept in the
    file's schema metadata (`read_metadata`).

    `checkpoints` is the manifest: its rows are merged into the series' one file (a row with the same
    `CheckpointKey` replaces the stored one), `file_key` naming the result files the rows commit (rows may
    carry their own `file_key`; `input_scores_kept` defaults to whether that input_scores file exists); of two rows with the same key
    the newer `analyzed_at` stays.
    Prefer `commit_checkpoint`, which writes a result's files and its row in the right order.
    """
    if table == Table.checkpoints:
        return _merge_manifest(store, data, file_key, model_id)
    t = conform(data, table)
    series = _series_of(t, table, model_id)
    if metadata:
        t = t.replace_schema_metadata({str(k): str(v) for k, v in metadata.items()})
    return _write_file(store_folder(store, create=True), table, series, file_key, t)


def _series_of(t: pa.Table, table: str, model_id: str | None) -> str:
    ids = t.column("model_id").unique().to_pylist()
    if len(ids) > 1:
        raise StoreError(
            f"table {table!r}: one file holds one series, got model ids {sorted(ids)}: write one file per model_id"
        )
    if model_id is not None and ids and ids[0] != model_id:
        raise StoreError(f"table {table!r}: rows are of model id {ids[0]!r}, not {model_id!r}")
    if not ids and model_id is None:
        raise StoreError(f"table {table!r}: an empty table needs model_id=... to name its series")
    return str(ids[0] if ids else model_id)


def _write_file(root: Path, table: str, series: str, file_key: str, t: pa.Table) -> Path:
    folder = series_dir(root, table, series)
    final = folder / f"{safe_file_key(file_key)}.parquet"
    refuse_links(root, final)
    with write_errors(folder):
        folder.mkdir(parents=True, exist_ok=True)
    sweep_dead_temps(folder)
    if table in RESULT_TABLES:  # their checksums go into their manifest row (`commit_checkpoint`)
        with atomic_file(final) as f:
            pq.write_table(t, f, **parquet_options(t))
    else:
        write_parquet(root, series, final, t, parquet_options(t))
    return final


def refuse_links(root: Path, path: Path) -> None:
    """StoreError when a write to `path` (a file of the store at `root`) would go through a symbolic link: into a
    folder the link points to, or over the link; what it points to is not the store's to replace."""
    for p in [path, *path.parents]:
        if p == root:
            return
        if p.is_symlink():
            raise StoreError(
                f"store {str(root)!r}: {p.relative_to(root)} is a symbolic link (to {os.readlink(p)}); the store "
                "writes only its own files and folders: remove the link (what it points to stays as it is), "
                "then run this again"
            )


def parquet_options(t: pa.Table) -> dict:
    split = [n for n in t.schema.names if n in NOISY_FLOATS and pa.types.is_floating(t.schema.field(n).type)]
    # every data page carries a CRC32 that reads verify (`_SCAN`): flipped bytes are an error, not other values
    if not split:
        return {"compression": "zstd", "write_page_checksum": True}
    return {
        "compression": "zstd",
        "write_page_checksum": True,
        "use_byte_stream_split": split,
        "use_dictionary": [n for n in t.schema.names if n not in split],
    }


def _merge_manifest(store, data, file_key: str, model_id: str | None) -> Path:
    rows = data.to_pylist() if isinstance(data, pa.Table) else [dict(r) for r in data]
    root = store_folder(store, create=True)
    for r in rows:
        r.setdefault("file_key", safe_file_key(file_key))
        if "input_scores_kept" not in r and r.get("model_id"):
            path = series_dir(root, Table.input_scores, r["model_id"]) / f"{r['file_key']}.parquet"
            r["input_scores_kept"] = path.is_file()
    new = conform(rows, Table.checkpoints)
    series = _series_of(new, Table.checkpoints, model_id)
    with series_lock(root, series):
        merged = dedupe_checkpoints(pa.concat_tables([read_manifest(root, series), new]))  # the newest row per key
        return _write_file(root, Table.checkpoints, series, MANIFEST_KEY, merged)


def commit_checkpoint(store, row: dict, head_scores: pa.Table, input_scores: pa.Table | None = None) -> Path:
    """Store one checkpoint's result: its head_scores (and input_scores) files, then its manifest row last,
    all under `series_lock`. The files are named by `checkpoint_file_key` of the row's `CheckpointKey`."""
    key = CheckpointKey(*(row[c] for c in CheckpointKey._fields))
    file_key = checkpoint_file_key(key)
    model_id = row["model_id"]
    digest = scores_digest(head_scores)
    manifest_row = conform(
        [{**row, "file_key": file_key, "input_scores_kept": input_scores is not None, "scores_sha256": digest}],
        Table.checkpoints,
    )
    row = manifest_row.to_pylist()[0]
    meta = {MANIFEST_ROW_KEY: json.dumps({**row, "analyzed_at": row["analyzed_at"].isoformat()})}
    with series_lock(store, model_id):
        root = Path(store)
        check_manifest(root, model_id)  # never commit next to results a lost manifest no longer names
        if not manifest_path(root, model_id).is_file():
            # The manifest exists before the series' first result: a crash between a result's files and its row
            # then leaves an orphan beside an (empty) manifest, which the rerun overwrites, not a "lost manifest".
            write_manifest(root, model_id, SCHEMAS[Table.checkpoints].empty_table())
        if input_scores is not None:
            path = write_table(store, Table.input_scores, input_scores, file_key=file_key, model_id=model_id)
            row |= {"input_scores_sha256": sha256_file(path), "input_scores_bytes": path.stat().st_size}
        path = write_table(store, Table.head_scores, head_scores, file_key=file_key, model_id=model_id, metadata=meta)
        row |= {"head_scores_sha256": sha256_file(path), "head_scores_bytes": path.stat().st_size}
        return write_table(store, Table.checkpoints, [row], file_key=file_key, model_id=model_id)


def write_manifest(root: Path, model_id: str, checkpoints: pa.Table) -> Path:
    """Replace a series' whole manifest in the store folder `root` (opened by the caller, who holds
    `series_lock`): `store repair`, `store gc`, `store upgrade`."""
    return _write_file(Path(root), Table.checkpoints, model_id, MANIFEST_KEY, conform(checkpoints, Table.checkpoints))


def drop_legacy_derived(store, model_id: str, taus_id: str) -> None:
    """Delete the derived files of schema version 3's naming (one per taus, `<table>-<taus_id>`), which the
    per-calibration-set files replace; hold `series_lock`."""
    root = store_folder(store)
    for table in (Table.transitions, Table.head_histories):
        (series_dir(root, table, model_id) / f"{table}-{safe_file_key(taus_id)}.parquet").unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------- reads


def _filter_expression(filters, schema: pa.Schema):
    if filters is None or isinstance(filters, ds.Expression):
        return filters
    if not isinstance(filters, Mapping):
        raise StoreError("filters: pass a dict {column: value or list of values} or a pyarrow.dataset expression")
    expr = None
    for name, value in filters.items():
        if name not in schema.names:
            raise StoreError(f"filter on unknown column {name!r}{did_you_mean(name, schema.names)}")
        if isinstance(value, (list, tuple, set, frozenset)):
            term = ds.field(name).isin(list(value))
        else:
            term = ds.field(name) == value
        expr = term if expr is None else expr & term
    return expr


# Reads verify every data page's CRC32 (written by `parquet_options`; files written before have none).
_SCAN = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True)
)


def read_files(files: list[Path], schema: pa.Schema, expr, columns=None) -> pa.Table:
    if not files:
        t = schema.empty_table()
        return t.select(columns) if columns is not None else t
    try:
        t = ds.dataset([str(p) for p in files], schema=schema, format=_SCAN).to_table(filter=expr, columns=columns)
    except (OSError, pa.ArrowException) as e:
        raise _read_failure(files, e) from None
    # a file without one of the schema's columns (a damaged footer renames it) reads as nulls: refused
    if any(t.column(f.name).null_count for f in t.schema if not schema.field(f.name).nullable):
        raise _read_failure(files, StoreError("a column that needs a value in every row has none"))
    return t


def _read_failure(files: list[Path], e: Exception) -> StoreError:
    """The StoreError of a failed read: the first damaged file by name (each checked alone), with the fix."""
    if isinstance(e, OSError) and e.errno in USER_ERRNOS:
        return StoreError(f"cannot read {str(files[0].parent)!r}: {e.strerror}; fix its permissions")
    for path in files:
        reason = damage_of(path)
        if reason is not None:
            return damaged_error(path, reason)
    return damaged_error(files[0], _one_line(e))


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def damaged_error(path: Path, reason: str) -> StoreError:
    root = store_root_of(path)
    return StoreError(f"store file {str(Path(path).relative_to(root))!r} is damaged ({reason}); {damage_fix(root)}")


def damage_of(path: Path, sha256: str | None = None, size: int | None = None, *, pages: bool = True) -> str | None:
    """Why a data file cannot be trusted (None: it is whole): a size or content checksum other than the manifest
    records (when given), an unreadable footer, a column of its table missing or one it does not have (every
    write conforms to the schema: a stray name is a damaged footer, e.g. `confident` flipped to `confidenu`), or
    (`pages`) a data page whose CRC fails."""
    try:
        if size is not None and path.stat().st_size != size:
            return f"{path.stat().st_size} bytes, the manifest recorded {size}"
        if sha256 is not None and sha256_file(path) != sha256:
            return "its content checksum differs from the manifest's"
        table = path.parents[1].name
        f = pq.ParquetFile(path, page_checksum_verification=True)
        if table in SCHEMAS:
            # the Parquet schema's names, not the Arrow schema kept beside them (a second copy, which reads restore)
            names = list(dict.fromkeys(c.path.split(".")[0] for c in f.schema))
            missing = [x.name for x in SCHEMAS[table] if not x.nullable and x.name not in names]
            if missing:
                return f"no column {missing[0]!r}"
            stray = [n for n in names if n not in SCHEMAS[table].names]
            if stray:
                return f"a column {stray[0]!r} that {table} does not have{did_you_mean(stray[0], SCHEMAS[table].names)}"
        if pages:
            f.read()
    except (OSError, pa.ArrowException) as e:
        if isinstance(e, OSError) and e.errno in USER_ERRNOS:
            raise StoreError(f"cannot read {str(path)!r}: {e.strerror}; fix its permissions") from None
        return _one_line(e)
    return None


def read_manifest(root: Path, model_id: str) -> pa.Table:
    path = manifest_path(root, model_id)
    if not path.is_file() or path.is_symlink():
        return SCHEMAS[Table.checkpoints].empty_table()
    check_sums(root, [path])
    return read_files([path], SCHEMAS[Table.checkpoints], None)


def check_sums(root: Path, files: list[Path]) -> None:
    """The checked read of files that no manifest row names (a manifest, taus, derived tables: small, and read
    whole): a damaged_error when one differs from the checksum its write recorded (`store.sums`)."""
    recorded: dict[str, dict] = {}
    for path in files:
        slug = Path(path).relative_to(root).parts[1]  # <table>/series=<slug>/...: a file or a derived file's part
        if slug not in recorded:
            recorded[slug] = read_sums(root, model_id_of_slug(slug.removeprefix("series=")))
        reason = sum_mismatch(path, recorded_entry(root, recorded[slug], path))
        if reason is not None:
            raise damaged_error(path, reason)


def series_ids(root: Path, table: str) -> list[str]:
    return sorted(model_id_of_slug(d.name.removeprefix("series=")) for d in (root / table).glob("series=*"))


def read_table(
    store, table: str, model_id: str | None = None, filters=None, *, dedupe: bool = True, columns=None, manifest=None
) -> pa.Table:
    """All rows of `table` (optionally of one series and matching `filters`), with exactly SCHEMAS[table]'s columns
    (or only `columns`, in that order). `manifest`: the series' manifest rows, when the caller holds them (a series
    opened once reads its results without reading its manifest again).

    `filters`: {column: value or list of values} (all must hold) or a pyarrow.dataset expression.
    An empty table with the right schema when nothing is stored. head_scores and input_scores come from the
    files the manifest names (see the module docstring); `dedupe` keeps, per revision and calibration set
    (and taus), only the newest result, as the manifest says, and one manifest row per `CheckpointKey`.
    """
    schema = table_schema(table)
    root = store_folder(store)
    expr = _filter_expression(filters, schema)
    if model_id is not None:
        model_expr = ds.field("model_id") == model_id
        expr = model_expr if expr is None else expr & model_expr
    if table in RESULT_TABLES:
        series = (
            [model_id]
            if model_id is not None
            else sorted({*series_ids(root, Table.checkpoints), *series_ids(root, table)})
        )
        files = [p for m in series for p in result_files(root, table, m, filters, dedupe=dedupe, manifest=manifest)]
    else:
        files = data_files(root, table, model_id)
        check_sums(root, files)
    t = read_files(files, schema, expr, columns)
    if dedupe and table == Table.checkpoints and columns is None:
        t = dedupe_checkpoints(t)
    return t


def result_files(
    root: Path, table: str, model_id: str, filters=None, *, dedupe: bool = True, manifest=None
) -> list[Path]:
    """The head_scores or input_scores files of a series' manifest rows (read here, unless given) that `filters` (a
    dict) can match.

    StoreError, naming `dormant store repair`, when a file the manifest names is missing.
    """
    if manifest is None:
        manifest = read_manifest(root, model_id)
    else:
        manifest = pa.Table.from_pylist(list(manifest), schema=SCHEMAS[Table.checkpoints])
    if isinstance(filters, Mapping):  # prune on the columns the manifest shares with the table
        shared = {
            k: v for k, v in filters.items() if k in SCHEMAS[Table.checkpoints].names and k in SCHEMAS[table].names
        }
        expr = _filter_expression(shared, SCHEMAS[Table.checkpoints])
        if expr is not None:
            manifest = manifest.filter(expr)
    if table == Table.input_scores:
        manifest = manifest.filter(manifest.column("input_scores_kept"))
    rows = manifest.to_pylist() if manifest.num_rows else []
    if dedupe:  # per result group, the newest result
        group = [c for c in RESULT_GROUP if c in SCHEMAS[table].names]  # input_scores do not depend on taus
        newest: dict[tuple, dict] = {}
        for r in sorted(rows, key=lambda r: (r["analyzed_at"], r["file_key"])):
            newest[tuple(r[c] for c in group)] = r
        rows = list(newest.values())
    return sorted(set(check_result_files(root, model_id, rows, table)))


def check_result_files(
    root: Path, model_id: str, rows, table: str = Table.head_scores, *, listed: bool = True
) -> list[Path]:
    """The `table` files of manifest `rows` (none with `listed=False`: the checks alone); StoreError naming `dormant
    store repair` when one is missing, or when there are no rows and the manifest names none of the series' files
    (`check_manifest`)."""
    if not rows:
        check_manifest(root, model_id)
    folder = series_dir(root, table, model_id)
    base = os.fspath(folder)
    files = []
    for r in rows:  # one stat per file (a series' open checks every file the manifest names)
        name = f"{r['file_key']}.parquet"
        try:
            st = os.stat(os.path.join(base, name))
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            path = folder / name
            raise StoreError(
                f"store {str(root)!r}: the {table} file of {model_id}@{r['revision']} ({path.name}) is missing "
                "(deleted by hand?); "
                + damage_fix(
                    root, "it drops such checkpoints from the manifest, and the next `dormant track` scores them again"
                )
            )
        size = r.get(f"{table}_bytes")
        if size is not None and st.st_size != size:  # the cheap check of every read: the checksum is status's
            path = folder / name
            raise damaged_error(path, f"{st.st_size} bytes, the manifest recorded {size}")
        if listed:
            files.append(folder / name)
    return files


def check_manifest(root: Path, model_id: str) -> None:
    """StoreError naming `dormant store repair` when the series has head_scores files but no manifest (deleted
    by hand): read as "nothing stored", its results would be scored again, or deleted as orphans. The manifest
    is written before a series' first result, so a crash never leaves files without one."""
    path = manifest_path(root, model_id)
    if path.is_file():
        return
    heads = data_files(root, Table.head_scores, model_id)
    if heads:
        raise StoreError(
            f"store {str(root)!r}: series {model_id} has {len(heads)} head_scores files but no manifest "
            f"({path.relative_to(root)} is missing: deleted by hand?); "
            + damage_fix(root, "it rebuilds the manifest from the files")
        )


def read_metadata(store, table: str, model_id: str, file_key: str) -> dict[str, str] | None:
    """The schema metadata `write_table(..., metadata=)` kept in one file, or None when the file does not exist."""
    path = series_dir(store_folder(store), table, model_id) / f"{safe_file_key(file_key)}.parquet"
    if not path.is_file():
        return None
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException) as e:
        raise _read_failure([path], e) from None
    return {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW")}


def dedupe_checkpoints(checkpoints: pa.Table) -> pa.Table:
    """One row per (model_id, revision, commit, calibration_id, taus_id, scoring_version): the newest analyzed_at."""
    if checkpoints.num_rows == 0:
        return checkpoints
    newest_first = checkpoints.sort_by([("analyzed_at", "descending")])
    keys = zip(*(newest_first.column(c).to_pylist() for c in CHECKPOINT_KEY_COLUMNS))
    seen: set = set()
    keep = []
    for i, key in enumerate(keys):
        if key not in seen:
            seen.add(key)
            keep.append(i)
    if len(keep) == checkpoints.num_rows:
        return checkpoints
    return newest_first.take(sorted(keep)) if keep else newest_first.slice(0, 0)


def stored_checkpoint_keys(store, model_id: str) -> set[CheckpointKey]:
    """The results already stored for a series (empty when the store or series does not exist yet)."""
    if not (Path(store) / MARKER).is_file():
        return set()
    t = read_table(store, Table.checkpoints, model_id=model_id, dedupe=False, columns=list(CheckpointKey._fields))
    if not t.num_rows:
        check_manifest(Path(store), model_id)
    return set(map(CheckpointKey._make, zip(*(t.column(c).to_pylist() for c in CheckpointKey._fields))))


def manifest_path(root: Path, model_id: str) -> Path:
    return series_dir(root, Table.checkpoints, model_id) / f"{MANIFEST_KEY}.parquet"
