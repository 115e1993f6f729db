"""Checkpoints: which checkpoints a series has and in which order (`list_revisions`, `Revision`, `Selection`), the
Hugging Face Hub (pinned, verified downloads), file hashes, and a model loaded at a revision
(`load_checkpoint`, `load_model_at`). Layer 2: it uses only the shared leaves.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "MAIN",
    "Revision",
    "Selection",
    "UNKNOWN",
    "cache_dir",
    "check_repo_id",
    "download_revision",
    "fetch_revision",
    "file_sha256",
    "format_tokens",
    "go_offline",
    "hub_endpoint",
    "hub_silence",
    "is_transient",
    "list_revisions",
    "load_checkpoint",
    "load_model_and_tokenizer",
    "load_model_at",
    "local_content_hash",
    "parse_revision_name",
    "resolve_device",
    "series_sort_key",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.checkpoints.hash_cache import cache_dir
    from dormant_tasks.checkpoints.hub import (
        check_repo_id,
        download_revision,
        file_sha256,
        hub_endpoint,
        hub_silence,
        is_transient,
        local_content_hash,
    )
    from dormant_tasks.checkpoints.hub_adapter import go_offline
    from dormant_tasks.checkpoints.loading import (
        fetch_revision,
        load_checkpoint,
        load_model_and_tokenizer,
        load_model_at,
        resolve_device,
    )
    from dormant_tasks.checkpoints.naming import (
        MAIN,
        UNKNOWN,
        Revision,
        Selection,
        format_tokens,
        list_revisions,
        parse_revision_name,
        series_sort_key,
    )

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "hash_cache": ["cache_dir"],
        "hub": [
            "check_repo_id",
            "download_revision",
            "file_sha256",
            "hub_endpoint",
            "hub_silence",
            "is_transient",
            "local_content_hash",
        ],
        "hub_adapter": ["go_offline"],
        "loading": ["fetch_revision", "load_checkpoint", "load_model_and_tokenizer", "load_model_at", "resolve_device"],
        "naming": [
            "MAIN",
            "UNKNOWN",
            "Revision",
            "Selection",
            "format_tokens",
            "list_revisions",
            "parse_revision_name",
            "series_sort_key",
        ],
    },
)
