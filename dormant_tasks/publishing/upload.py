"""A publication uploaded as a Hugging Face dataset repo (`dormant publish --repo-id ORG/NAME`; docs/PUBLISHING.md,
"What goes up, and when"): compared by content with what the repo holds, in one `create_commit` pinned to the head
it compared with (`parent_commit`), or none; a file the tool did not write refuses the upload unless allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from dormant_tasks.checkpoints import is_transient
from dormant_tasks.errors import ConfigError, StoreError
from dormant_tasks.publishing.contents import Publication
from dormant_tasks.store import PUBLISHED

REPO_TYPE = "dataset"
HUB_FILES = (".gitattributes",)  # what the Hub writes into a new repo itself
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class UploadResult:
    repo_id: str
    url: str
    commit: str | None  # the new commit; None when the repo already held the publication
    head: str  # the repo's head after the upload
    added: tuple[str, ...]  # files sent (new or changed)
    deleted: tuple[str, ...]  # files of an earlier publication removed
    created: bool  # the repo was created by this upload
    foreign: tuple[str, ...]  # files the tool did not write, left alone (`allow_foreign`)


def check_dataset_repo(repo_id: str) -> str:
    """`repo_id` when it is spelled ORG/NAME as the Hub takes it; else a one-line ConfigError."""
    value = (repo_id or "").strip()
    bad = not _REPO_ID.fullmatch(value) or "--" in value or ".." in value or len(value.split("/")[1]) > 96
    if bad or value.endswith((".", "-")):
        raise ConfigError(
            f"--repo-id {repo_id!r} is not a dataset repo id: write ORG/NAME (letters, digits, '.', '_', '-'; no '--' "
            "or '..'; a name of at most 96 characters), e.g. my-lab/olmo2-1b-dormant-heads"
        )
    return value


def hub_token() -> str:
    """The token huggingface_hub finds (`HF_TOKEN`, then the file `hf auth login` writes); ConfigError when none."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise ConfigError(
            "no Hugging Face token: an upload needs one with write access; run `hf auth login`, or set HF_TOKEN "
            "(nothing was uploaded)"
        )
    return token


def upload_publication(
    pub: Publication,
    repo_id: str,
    *,
    private: bool = False,
    allow_foreign: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> UploadResult:
    """Upload `pub` to the dataset repo `repo_id` in one commit (docs/PUBLISHING.md); `say` gets the lines a user
    reads once the repo is known to take it, before anything is sent (what the publication weighs, what will be
    sent)."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, RepoFile
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    repo_id = check_dataset_repo(repo_id)
    token = token or hub_token()
    api = HfApi(endpoint=endpoint, token=token)
    created = False
    try:
        try:
            head = repo_head(api, repo_id)
        except RepositoryNotFoundError:
            api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
            head = repo_head(api, repo_id)
            created = True
        remote = {
            f.path: f
            for f in api.list_repo_tree(repo_id, repo_type=REPO_TYPE, recursive=True, revision=head)
            if isinstance(f, RepoFile)
        }
        written = _written_before(api, repo_id, head, remote)
    except HfHubHTTPError as e:
        raise _hub_error(repo_id, e, "nothing was uploaded") from None
    except Exception as e:
        if not (is_transient(e) or isinstance(e, OSError)):
            raise
        raise StoreError(f"the Hub at {api.endpoint} cannot be reached ({_why(e)}); nothing was uploaded") from None
    foreign = sorted(p for p in remote if p not in written and p not in HUB_FILES)
    if foreign and not allow_foreign:
        raise ConfigError(
            f"the dataset repo {repo_id} holds {len(foreign)} file(s) dormant publish did not write (e.g. "
            f"{foreign[0]}): publish to a new --repo-id, or add --allow-foreign to publish beside them (files of "
            "the same name are replaced, the rest kept); nothing was uploaded"
        )
    say(pub.summary())
    added = [p for p in pub.files if not _holds(remote.get(p), pub.digest(p))]
    deleted = sorted(p for p in written if p in remote and p not in pub.files)
    url = f"{api.endpoint}/datasets/{repo_id}"
    if not added and not deleted:
        say(f"{repo_id} already holds this publication (commit {head[:12]}): nothing to upload")
        return UploadResult(repo_id, url, None, head, (), (), created, tuple(foreign))
    size = sum(_size(pub, p) for p in added)
    say(
        f"uploading {len(added)} of {len(pub.files)} files ({size / 2**20:.2f} MiB)"
        + (f", deleting {len(deleted)} an earlier publication wrote" if deleted else "")
        + f" to {url}, in one commit"
    )
    operations = [
        CommitOperationAdd(path_in_repo=p, path_or_fileobj=c if isinstance(c, bytes) else str(c))
        for p in added
        for c in [pub.files[p]]
    ] + [CommitOperationDelete(path_in_repo=p) for p in deleted]
    try:
        info = api.create_commit(
            repo_id,
            operations,
            commit_message=f"dormant publish: {pub.model_id} ({pub.n_checkpoints} checkpoints)",
            commit_description=f"Written by {pub.record()['written_by']} (`dormant publish`).",
            repo_type=REPO_TYPE,
            parent_commit=head,
        )
    except HfHubHTTPError as e:
        raise _hub_error(repo_id, e, _after_failure(api, repo_id, head)) from None
    except Exception as e:
        # the network (httpx's errors derive from no builtin: `is_transient`), or an LFS upload the client gave up
        # on (its RuntimeError, the cause chained)
        if not (is_transient(e) or isinstance(e, OSError | RuntimeError)):
            raise
        raise StoreError(f"the upload to {repo_id} failed ({_why(e)}); {_after_failure(api, repo_id, head)}") from None
    return UploadResult(repo_id, url, info.oid, info.oid, tuple(added), tuple(deleted), created, tuple(foreign))


def repo_head(api, repo_id: str, revision: str | None = None) -> str:
    """The commit a dataset repo's `revision` (default: its main branch) points to."""
    sha = api.repo_info(repo_id, repo_type=REPO_TYPE, revision=revision).sha
    if not sha:
        raise StoreError(f"the Hub gave no commit for the dataset repo {repo_id}; try again")
    return sha


def _written_before(api, repo_id: str, head: str, remote: dict) -> set[str]:
    """The files an earlier `dormant publish` wrote to the repo (its `_published.json`, itself included); none when
    the record is missing or is not one of the tool's."""
    if PUBLISHED not in remote:
        return set()
    from huggingface_hub import HfFileSystem

    fs = HfFileSystem(endpoint=api.endpoint, token=api.token)
    try:
        record = json.loads(fs.cat_file(f"datasets/{repo_id}@{head}/{PUBLISHED}"))
        files = set(record["files"])
    except (ValueError, KeyError, TypeError):
        return set()
    return files | {PUBLISHED}


def _holds(entry, digest: tuple[str, str]) -> bool:
    """Whether a repo file (a `RepoFile`, or None) has the content of `digest` (sha256, git blob oid)."""
    if entry is None:
        return False
    lfs = getattr(entry, "lfs", None)
    if lfs is not None:
        return lfs.sha256 == digest[0]
    return entry.blob_id == digest[1]


def _size(pub: Publication, path: str) -> int:
    content = pub.files[path]
    return len(content) if isinstance(content, bytes) else content.stat().st_size


def _after_failure(api, repo_id: str, head: str) -> str:
    """What the repo holds after a failed upload, asked again: its old head (nothing published), or a new one."""
    try:
        now = repo_head(api, repo_id)
    except Exception:  # noqa: BLE001 - the Hub may not answer at all now; the line says so
        return (
            "the Hub does not answer now; a commit is all or nothing, so the repo holds either the earlier "
            "publication or this one: run dormant publish again, it uploads only what is missing"
        )
    if now == head:
        return "nothing was published (no commit was made): run dormant publish again"
    return f"the repo's head moved to {now[:12]}: run dormant publish again, it uploads only what differs"


def _hub_error(repo_id: str, e, state: str) -> StoreError:
    status = e.response.status_code if getattr(e, "response", None) is not None else None
    if status in (401, 403):
        why = "the Hub refused the token: it needs write access to " + repo_id + " (`hf auth login`, or HF_TOKEN)"
    elif status == 412:
        why = f"{repo_id} changed while this upload ran"
    else:
        why = f"the Hub answered {status}: {_why(e)}"
    return StoreError(f"{why}; {state}")


def _why(e: BaseException) -> str:
    """One line of an error, its cause's beside it (the client wraps an LFS upload's failure)."""
    cause = e.__cause__ if e.__cause__ is not None and str(e.__cause__) not in str(e) else None
    text = " ".join(f"{e}{f': {cause}' if cause else ''}".split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."
