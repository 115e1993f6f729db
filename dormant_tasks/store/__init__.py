"""The Parquet store (docs/DATA_CONTRACT.md): its layout and the checks of a --store path (`check_store_path`,
`check_store`), schemas, atomic writes and reads through each series' manifest (`commit_checkpoint`,
`read_table`), one writer per series (`hold_series`), saved requests and series sources, repair and the files'
upgrade. Layer 2: the only code that knows the store's folders; it uses only the shared leaves.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.store.input_scores import (
        INPUT_SCORES_AUTO_LIMIT as INPUT_SCORES_AUTO_LIMIT,
        InputScoresPolicy as InputScoresPolicy,
        keep_input_scores as keep_input_scores,
    )
    from dormant_tasks.store.io import (
        check_result_files as check_result_files,
        commit_checkpoint as commit_checkpoint,
        conform as conform,
        damage_of as damage_of,
        drop_legacy_derived as drop_legacy_derived,
        list_models as list_models,
        manifest_path as manifest_path,
        read_metadata as read_metadata,
        read_table as read_table,
        stored_checkpoint_keys as stored_checkpoint_keys,
        write_manifest as write_manifest,
        write_table as write_table,
    )
    from dormant_tasks.store.layout import (
        MARKER as MARKER,
        PUBLISHED as PUBLISHED,
        SCHEMA_VERSION as SCHEMA_VERSION,
        StoreFolder as StoreFolder,
        Table as Table,
        check_store as check_store,
        check_store_path as check_store_path,
        comparisons_files as comparisons_files,
        damage_fix as damage_fix,
        is_store as is_store,
        refuse_published as refuse_published,
        running_writers as running_writers,
        series_files as series_files,
        store_folder as store_folder,
        store_root_of as store_root_of,
    )
    from dormant_tasks.store.lock import (
        hold_series as hold_series,
        holds_series as holds_series,
        series_lock as series_lock,
    )
    from dormant_tasks.store.parts import (
        GENERATION_KEY as GENERATION_KEY,
        all_parts as all_parts,
        delete_parts as delete_parts,
        drop_parts as drop_parts,
        new_generation as new_generation,
        part_files as part_files,
        part_metadata as part_metadata,
        read_parts as read_parts,
        stale_parts as stale_parts,
        write_part as write_part,
    )
    from dormant_tasks.store.provenance import (
        check_source as check_source,
        local_sources_named as local_sources_named,
        recorded_source as recorded_source,
        series_name_of as series_name_of,
        stored_requests as stored_requests,
        write_request as write_request,
    )
    from dormant_tasks.store.published import (
        publication_damage as publication_damage,
        publication_files as publication_files,
        publication_listed as publication_listed,
    )
    from dormant_tasks.store.repair import (
        all_series as all_series,
        damaged_files as damaged_files,
        gc_store as gc_store,
        repair_store as repair_store,
        store_links as store_links,
        unchecked_files as unchecked_files,
    )
    from dormant_tasks.store.schema import (
        RESULT_TABLES as RESULT_TABLES,
        SCHEMAS as SCHEMAS,
        CheckpointKey as CheckpointKey,
        checkpoint_file_key as checkpoint_file_key,
        derived_file_key as derived_file_key,
        scores_digest as scores_digest,
    )
    from dormant_tasks.store.upgrade import (
        DERIVED as DERIVED,
        convert_store as convert_store,
        finish_upgrade as finish_upgrade,
        read_any_version as read_any_version,
        rewrite_file as rewrite_file,
        series_to_upgrade as series_to_upgrade,
        table_files as table_files,
        write_any_version as write_any_version,
    )

__all__, __getattr__, __dir__ = attach(__name__)
