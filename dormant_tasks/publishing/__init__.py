"""A tracked series published as a Hugging Face dataset repo, and opened again without scoring anything (layer 6,
above reporting): `build_publication` (a store of the series' current results, byte for byte, with the findings
as a table, the dataset card and the record of what the tool wrote), `write_publication` (into a folder) and
`upload_publication` (one commit, only the files that changed); `open_published` (an `hf://datasets/ORG/NAME`
store fetched into a cached, read-only store folder).
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.publishing.contents import (
        Publication as Publication,
        build_publication as build_publication,
        check_license as check_license,
        write_publication as write_publication,
    )
    from dormant_tasks.publishing.opening import (
        is_hub_store as is_hub_store,
        open_published as open_published,
        parse_hub_store as parse_hub_store,
    )
    from dormant_tasks.publishing.upload import (
        UploadResult as UploadResult,
        check_dataset_repo as check_dataset_repo,
        hub_token as hub_token,
        upload_publication as upload_publication,
    )

__all__, __getattr__, __dir__ = attach(__name__)
