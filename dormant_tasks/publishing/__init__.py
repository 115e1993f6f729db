"""A tracked series published as a Hugging Face dataset repo, and opened again without scoring anything (layer 6,
above reporting): `build_publication` (a store of the series' current results, byte for byte, with the findings
as a table, the dataset card and the record of what the tool wrote), `write_publication` (into a folder) and
`upload_publication` (one commit, only the files that changed); `open_published` (an `hf://datasets/ORG/NAME`
store fetched into a cached, read-only store folder).
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "Publication",
    "UploadResult",
    "build_publication",
    "check_dataset_repo",
    "check_license",
    "hub_token",
    "is_hub_store",
    "open_published",
    "parse_hub_store",
    "upload_publication",
    "write_publication",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.publishing.contents import Publication, build_publication, check_license, write_publication
    from dormant_tasks.publishing.opening import is_hub_store, open_published, parse_hub_store
    from dormant_tasks.publishing.upload import UploadResult, check_dataset_repo, hub_token, upload_publication

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "contents": ["Publication", "build_publication", "check_license", "write_publication"],
        "opening": ["is_hub_store", "open_published", "parse_hub_store"],
        "upload": ["UploadResult", "check_dataset_repo", "hub_token", "upload_publication"],
    },
)
