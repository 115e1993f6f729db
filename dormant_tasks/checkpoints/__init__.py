"""Checkpoints: where a series' checkpoints come from (`CheckpointSource`: the Hugging Face Hub, a local folder, more
by `register_source`), which checkpoints it has and in which order (`list_revisions`, `Revision`, `Selection`),
pinned, verified downloads, file hashes, and a model loaded at a revision (`load_checkpoint`, `load_model_at`).
Layer 2: it uses only the shared leaves.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.checkpoints.audit import (
        Flag as Flag,
        audit_series as audit_series,
        format_audit as format_audit,
    )
    from dormant_tasks.checkpoints.hash_cache import cache_dir as cache_dir
    from dormant_tasks.checkpoints.hub import (
        cache_free_bytes as cache_free_bytes,
        check_repo_id as check_repo_id,
        download_revision as download_revision,
        file_sha256 as file_sha256,
        hub_endpoint as hub_endpoint,
        hub_silence as hub_silence,
        is_transient as is_transient,
        local_content_hash as local_content_hash,
    )
    from dormant_tasks.checkpoints.hub_adapter import go_offline as go_offline
    from dormant_tasks.checkpoints.loading import (
        fetch_revision as fetch_revision,
        load_checkpoint as load_checkpoint,
        load_model_and_tokenizer as load_model_and_tokenizer,
        load_model_at as load_model_at,
        resolve_device as resolve_device,
    )
    from dormant_tasks.checkpoints.naming import (
        MAIN as MAIN,
        UNKNOWN as UNKNOWN,
        Revision as Revision,
        Selection as Selection,
        format_tokens as format_tokens,
        log_spread as log_spread,
        parse_revision_name as parse_revision_name,
        series_sort_key as series_sort_key,
        step_tokens as step_tokens,
        training_positions as training_positions,
    )
    from dormant_tasks.checkpoints.sources import (
        CheckpointSource as CheckpointSource,
        list_revisions as list_revisions,
        register_source as register_source,
        silent_hub as silent_hub,
        skipped_note as skipped_note,
        source_for as source_for,
    )

__all__, __getattr__, __dir__ = attach(__name__)
