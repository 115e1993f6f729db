"""Checkpoints: which checkpoints a series has and in which order (`list_revisions`, `Revision`, `Selection`), the
Hugging Face Hub (pinned, verified downloads), file hashes, and a model loaded at a revision
(`load_checkpoint`, `load_model_at`). Layer 2: it uses only the shared leaves.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import lazy_face

if TYPE_CHECKING:  # the public names, imported on first use (`dormant_tasks.face`)
    from dormant_tasks.checkpoints.hash_cache import cache_dir
    from dormant_tasks.checkpoints.hub import (
        check_repo_id,
        download_revision,
        file_sha256,
        hub_endpoint,
        hub_silence,
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

__getattr__, __dir__, __all__ = lazy_face(__name__)
