"""The store's side of `dormant store upgrade`: the files of a store of schema version 1, 2 or 3 rewritten in the
version-4 layout, in place (`convert_store`), and the marker written last (`finish_upgrade`). Transitions and
histories are derived again by the tracking part (`tracking.upgrade.upgrade_store`, which runs the whole upgrade).

Version 2 (docs/DATA_CONTRACT.md, "Changes from schema version 1"): `head` -> `head_index` everywhere,
`input_scores.value` -> `score`, `evaluations.pct_zeroed` (0-100) -> `frac_zeroed` (0-1) and accuracies
as fractions, `request_id` on checkpoints and evaluations (null for rows written before requests were
saved), and `transitions`/`head_histories` carrying `taus_id` and `calibration_id`; those two tables are
derived again from head_scores, once per stored taus_id.

Version 3 ("Changes from schema version 2"): `evaluations` gains the protocol columns. Rows written before
were measured one way only, so each gets that: metric `acc,none`, no chat template, the tokenizer's BOS
rule, shots drawn from the WinoGrande dev (`validation`) split (null when 0-shot, as version 3 writes
it), bundled data, no lm-eval, chance 0.5 (WinoGrande's two options), and `evaluated_at` = the file's
modification time (when its run wrote it).
The new table `evaluation_items` starts empty.

Version 4 ("Changes from schema version 3"): the `checkpoints` files of a series become its one manifest
file (`checkpoints.parquet`), each row gaining `file_key` (the name of the file it was read from, which
is that of its head_scores and input_scores files) and `input_scores_kept`; `input_scores.score` becomes
float32. Transitions and histories are derived again on the next `dormant track` (they record the
checkpoint pairs they come from from now on).

Each file goes from its own layout to the current one in one rewrite (so a version-1 evaluations file
still has the modification time of its run when `evaluated_at` is read). Every file is rewritten
atomically and the marker last, so an interrupted upgrade leaves a store that this command finishes when
run again (files already in the current layout are left as they are; the manifest is written before the
per-checkpoint `checkpoints` files it replaces are deleted).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from dormant_tasks.atomic import atomic_file
from dormant_tasks.errors import StoreError
from dormant_tasks.names import model_id_of_slug
from dormant_tasks.store.io import (
    conform,
    dedupe_checkpoints,
    parquet_options,
    read_files,
    read_manifest,
    refuse_links,
    result_files,
)
from dormant_tasks.store.layout import (
    SCHEMA_VERSION,
    Table,
    data_files,
    safe_file_key,
    series_dir,
    store_folder,
    store_root_of,
    store_version,
    write_marker,
)
from dormant_tasks.store.schema import MANIFEST_KEY, SCHEMAS
from dormant_tasks.store.sums import write_parquet

_RENAMES = {"head": "head_index", "value": "score", "pct_zeroed": "frac_zeroed"}
_PERCENT_COLUMNS = ("frac_zeroed", "accuracy", "base_accuracy")  # v1 stored these in %
_CONVERTED = (Table.checkpoints, Table.head_scores, Table.input_scores, Table.taus, Table.evaluations)
DERIVED = (Table.transitions, Table.head_histories)  # derived again by `tracking.upgrade`

# The evaluations columns of schema version 2, in order (docs/DATA_CONTRACT.md of that version).
V2_EVALUATION_NAMES = (
    *("model_id", "revision", "stage", "step", "tokens", "task", "shots", "mode", "score_fn", "quantile", "tau"),
    *("frac_zeroed", "accuracy", "n_items", "base_accuracy", "code_version", "request_id"),
)
WINOGRANDE_CHANCE = 0.5  # mean 1 / choices: two options per item
# The columns that version 3 added, with their value in rows written before: versions 1 and 2 measured one
# way only. `fewshot_split` is null in 0-shot rows; `chance` is WinoGrande's (two options), the one task
# they evaluated; `evaluated_at` is the file's modification time.
V3_EVALUATION_DEFAULTS = {
    "metric": "acc,none",  # lm-eval's key of the accuracy
    "chat_template": False,
    "bos": "tokenizer",  # the tokenizer added its own BOS (not lm-eval 0.4.5's add_special_tokens=False)
    "fewshot_split": "validation",  # shots came from other WinoGrande dev items
    "data_source": "bundled",
    "lm_eval_version": None,  # lm-eval was not used
    "chance": WINOGRANDE_CHANCE,
}


def convert_store(path) -> tuple[Path, int, int]:
    """(the store's folder, its schema version, files rewritten): every file of an older version rewritten in the
    current layout and each series' manifest compacted; nothing for a current store. The marker is not touched:
    until `finish_upgrade` the store reads as its old version, and an interrupted upgrade is finished when run
    again."""
    root = store_folder(path, allow_old=True)
    version = store_version(root)
    if version == SCHEMA_VERSION:
        return root, version, 0
    if version not in (1, 2, 3):
        raise StoreError(
            f"store {str(root)!r} has schema_version {version!r}; `dormant store upgrade` upgrades "
            f"versions 1 to 3 to {SCHEMA_VERSION} only"
        )
    rewritten = sum(_convert_file(p, table) for table in _CONVERTED for p in table_files(root, table))
    for model_id in series_to_upgrade(root):
        rewritten += _compact_manifest(root, model_id)
    return root, version, rewritten


def finish_upgrade(root: Path) -> None:
    """The marker of the current schema version, written last (module docstring)."""
    write_marker(root)


def table_files(root: Path, table: str) -> list[Path]:
    """A table's data files: the store's own (`data_files`), never what a symbolic link points to."""
    return sorted(data_files(root, table, None))


def series_to_upgrade(root: Path) -> list[str]:
    folders = (root / Table.checkpoints).glob("series=*")
    return sorted(model_id_of_slug(p.name.removeprefix("series=")) for p in folders if not p.is_symlink())


def rewrite_file(path: Path, t: pa.Table) -> None:
    """Replace a store file in place (`t` conformed by the caller); in a store of the current version its
    checksum is recorded (`store.sums`: the lock it takes opens current stores only)."""
    root = store_root_of(path)
    refuse_links(root, path)
    if store_version(root) == SCHEMA_VERSION:
        write_parquet(root, model_id_of_slug(path.parent.name.removeprefix("series=")), path, t, parquet_options(t))
        return
    with atomic_file(path) as f:
        pq.write_table(t, f, **parquet_options(t))


def _convert_file(path: Path, table: str) -> bool:
    """Rewrite one file of version 1, 2 or 3 in the current layout; False when it already is in it."""
    if pq.read_schema(path).remove_metadata().equals(SCHEMAS[table]):
        return False
    written_at = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)  # before the rewrite changes it
    t = pq.read_table(path)
    if "series" in t.column_names:
        t = t.drop_columns(["series"])
    if not (table == Table.evaluations and tuple(t.column_names) == V2_EVALUATION_NAMES):
        t = _v1_to_v2(t)
    if table == Table.evaluations and "metric" not in t.column_names:
        t = _v2_to_v3_evaluations(t, written_at)
    if table == Table.checkpoints and "file_key" not in t.column_names:  # v3 -> v4: a row names its result's files
        kept = (path.parents[2] / Table.input_scores / path.parent.name / path.name).is_file()
        t = t.append_column("file_key", pa.array([path.stem] * t.num_rows, pa.string()))
        t = t.append_column("input_scores_kept", pa.array([kept] * t.num_rows, pa.bool_()))
    rewrite_file(path, conform(t, table))
    return True


def _v1_to_v2(t: pa.Table) -> pa.Table:
    """Columns renamed, percentages as fractions (`request_id`, null here, is added by `conform`)."""
    percent = "pct_zeroed" in t.column_names  # v1 evaluations: rescale once, on the renamed columns
    t = t.rename_columns([_RENAMES.get(c, c) for c in t.column_names])
    if percent:
        for name in _PERCENT_COLUMNS:
            i = t.column_names.index(name)
            t = t.set_column(i, name, pc.divide(t.column(name).cast(pa.float64()), 100.0))
    return t


def _v2_to_v3_evaluations(t: pa.Table, written_at: datetime) -> pa.Table:
    """The protocol columns, with the one protocol that versions 1 and 2 evaluated under."""
    n = t.num_rows
    schema = SCHEMAS[Table.evaluations]
    values = dict(V3_EVALUATION_DEFAULTS)
    values["fewshot_split"] = [values["fewshot_split"] if s else None for s in t.column("shots").to_pylist()]
    values["chance"] = [WINOGRANDE_CHANCE if task == "winogrande" else None for task in t.column("task").to_pylist()]
    values["evaluated_at"] = written_at
    for name, value in values.items():
        t = t.append_column(name, pa.array(value if isinstance(value, list) else [value] * n, schema.field(name).type))
    return t


def _compact_manifest(root: Path, model_id: str) -> int:
    """v3 -> v4: a series' per-checkpoint `checkpoints` files become its one manifest file; 1 when rewritten."""
    old = [p for p in data_files(root, Table.checkpoints, model_id) if p.stem != MANIFEST_KEY]
    if not old:
        return 0
    rows = read_files(old, SCHEMAS[Table.checkpoints], None)
    merged = dedupe_checkpoints(pa.concat_tables([read_manifest(root, model_id), rows]))
    # first: a rerun after a crash finds the rows in one place or the other
    write_any_version(root, Table.checkpoints, merged, MANIFEST_KEY, model_id)
    for p in old:
        p.unlink()
    return 1


def read_any_version(root: Path, table: str, model_id: str, filters: dict | None = None) -> pa.Table:
    """`store.read_table` of one series (deduplicated the same way), at any schema version of the marker."""
    if table == Table.checkpoints:
        return dedupe_checkpoints(read_manifest(root, model_id))
    files = result_files(root, table, model_id, filters)
    expr = None
    for name, value in (filters or {}).items():
        term = ds.field(name) == value
        expr = term if expr is None else expr & term
    return read_files(files, SCHEMAS[table], expr)


def write_any_version(root: Path, table: str, t: pa.Table, file_key: str, model_id: str, metadata=None) -> Path:
    """`store.write_table` of one series' file, at any schema version of the marker."""
    folder = series_dir(root, table, model_id)
    path = folder / f"{safe_file_key(file_key)}.parquet"
    refuse_links(root, path)
    folder.mkdir(parents=True, exist_ok=True)
    t = conform(t, table)
    if metadata:
        t = t.replace_schema_metadata(metadata)
    rewrite_file(path, t)
    return path
