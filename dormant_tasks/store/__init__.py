"""The Parquet store (docs/DATA_CONTRACT.md): its layout and the checks of a --store path (`check_store_path`,
`check_store`), schemas, atomic writes and reads through each series' manifest (`commit_checkpoint`,
`read_table`), one writer per series (`hold_series`), saved requests and series sources, repair and the files'
upgrade. Layer 2: the only code that knows the store's folders; it uses only the shared leaves.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import lazy_face

if TYPE_CHECKING:  # the public names, imported on first use (`dormant_tasks.face`)
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
        open_store,
        series_files,
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
    from dormant_tasks.store.repair import all_series, damaged_files, gc_store, repair_store
    from dormant_tasks.store.schema import RESULT_TABLES, SCHEMAS, CheckpointKey, checkpoint_file_key, derived_file_key
    from dormant_tasks.store.upgrade import (
        DERIVED,
        convert_store,
        finish_upgrade,
        read_any_version,
        series_to_upgrade,
        table_files,
        write_any_version,
    )

__getattr__, __dir__, __all__ = lazy_face(__name__)
