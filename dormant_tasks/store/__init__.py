"""The Parquet store (docs/DATA_CONTRACT.md): its layout and the checks of a --store path (`check_store_path`,
`check_store`), schemas, atomic writes and reads through each series' manifest (`commit_checkpoint`,
`read_table`), one writer per series (`hold_series`), saved requests and series sources, repair and the files'
upgrade. Layer 2: the only code that knows the store's folders; it uses only the shared leaves.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "CheckpointKey",
    "DERIVED",
    "INPUT_SCORES_AUTO_LIMIT",
    "InputScoresPolicy",
    "MARKER",
    "RESULT_TABLES",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "all_series",
    "check_result_files",
    "check_source",
    "check_store",
    "check_store_path",
    "checkpoint_file_key",
    "commit_checkpoint",
    "conform",
    "convert_store",
    "damage_of",
    "damaged_files",
    "derived_file_key",
    "drop_legacy_derived",
    "finish_upgrade",
    "gc_store",
    "hold_series",
    "is_store",
    "keep_input_scores",
    "list_models",
    "local_sources_named",
    "manifest_path",
    "parquet_options",
    "read_any_version",
    "read_metadata",
    "read_table",
    "recorded_source",
    "repair_store",
    "rewrite_file",
    "series_files",
    "series_lock",
    "series_name_of",
    "series_to_upgrade",
    "store_folder",
    "store_links",
    "store_root_of",
    "stored_checkpoint_keys",
    "stored_requests",
    "table_files",
    "unchecked_files",
    "write_any_version",
    "write_manifest",
    "write_request",
    "write_table",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.store.input_scores import INPUT_SCORES_AUTO_LIMIT, InputScoresPolicy, keep_input_scores
    from dormant_tasks.store.io import (
        check_result_files,
        commit_checkpoint,
        conform,
        damage_of,
        drop_legacy_derived,
        list_models,
        manifest_path,
        parquet_options,
        read_metadata,
        read_table,
        stored_checkpoint_keys,
        write_manifest,
        write_table,
    )
    from dormant_tasks.store.layout import (
        MARKER,
        SCHEMA_VERSION,
        check_store,
        check_store_path,
        is_store,
        series_files,
        store_folder,
        store_root_of,
    )
    from dormant_tasks.store.lock import hold_series, series_lock
    from dormant_tasks.store.provenance import (
        check_source,
        local_sources_named,
        recorded_source,
        series_name_of,
        stored_requests,
        write_request,
    )
    from dormant_tasks.store.repair import (
        all_series,
        damaged_files,
        gc_store,
        repair_store,
        store_links,
        unchecked_files,
    )
    from dormant_tasks.store.schema import RESULT_TABLES, SCHEMAS, CheckpointKey, checkpoint_file_key, derived_file_key
    from dormant_tasks.store.upgrade import (
        DERIVED,
        convert_store,
        finish_upgrade,
        read_any_version,
        rewrite_file,
        series_to_upgrade,
        table_files,
        write_any_version,
    )

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "input_scores": ["INPUT_SCORES_AUTO_LIMIT", "InputScoresPolicy", "keep_input_scores"],
        "io": [
            "check_result_files",
            "commit_checkpoint",
            "conform",
            "damage_of",
            "drop_legacy_derived",
            "list_models",
            "manifest_path",
            "parquet_options",
            "read_metadata",
            "read_table",
            "stored_checkpoint_keys",
            "write_manifest",
            "write_table",
        ],
        "layout": [
            "MARKER",
            "SCHEMA_VERSION",
            "check_store",
            "check_store_path",
            "is_store",
            "series_files",
            "store_folder",
            "store_root_of",
        ],
        "lock": ["hold_series", "series_lock"],
        "provenance": [
            "check_source",
            "local_sources_named",
            "recorded_source",
            "series_name_of",
            "stored_requests",
            "write_request",
        ],
        "repair": ["all_series", "damaged_files", "gc_store", "repair_store", "store_links", "unchecked_files"],
        "schema": ["RESULT_TABLES", "SCHEMAS", "CheckpointKey", "checkpoint_file_key", "derived_file_key"],
        "upgrade": [
            "DERIVED",
            "convert_store",
            "finish_upgrade",
            "read_any_version",
            "rewrite_file",
            "series_to_upgrade",
            "table_files",
            "write_any_version",
        ],
    },
)
