"""A published series opened again without scoring anything: `--store hf://datasets/ORG/NAME[@REVISION]`
(docs/PUBLISHING.md, "Reading a published series"): the files its `_published.json` lists, fetched through
`HfFileSystem` into `<cache>/published/datasets--ORG--NAME/<revision>/` (one lock per repo), each checked against
its SHA-256, and read there as any store, read-only; offline, the cached copy with a note.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from dormant_tasks.atomic import sweep_dead_temps, temp_path, write_errors
from dormant_tasks.checkpoints import cache_dir, is_transient
from dormant_tasks.errors import ConfigError, StoreError
from dormant_tasks.hashing import sha256_file
from dormant_tasks.offline import hub_offline
from dormant_tasks.publishing.contents import RECORD_VERSION
from dormant_tasks.publishing.upload import check_dataset_repo, repo_head
from dormant_tasks.store import PUBLISHED

HUB_PREFIX = "hf://"
COMMIT_FILE = ".commit"  # the cached copy's commit (a dot name: no store reader sees it)


def is_hub_store(store) -> bool:
    """Whether a --store names a published series on the Hub (`hf://...`)."""
    return str(store).startswith(HUB_PREFIX)


def parse_hub_store(store: str) -> tuple[str, str]:
    """(repo id, revision) of `hf://datasets/ORG/NAME[@REVISION]`; ConfigError naming the form otherwise."""
    rest = str(store)[len(HUB_PREFIX) :].strip("/")
    if not rest.startswith("datasets/"):
        raise ConfigError(
            f"--store {store}: a published series is a dataset repo: write hf://datasets/ORG/NAME (or "
            "hf://datasets/ORG/NAME@REVISION)"
        )
    repo, _, revision = rest.removeprefix("datasets/").partition("@")
    try:
        check_dataset_repo(repo)
    except ConfigError:
        raise ConfigError(f"--store {store}: {repo!r} is not a dataset repo id; write hf://datasets/ORG/NAME") from None
    return repo, revision or "main"


def cached_folder(repo_id: str, revision: str) -> Path:
    """Where the copy of `repo_id` at `revision` (as asked for: a branch keeps its folder as it moves) is kept."""
    return cache_dir() / "published" / f"datasets--{repo_id.replace('/', '--')}" / re.sub(r"[^\w.-]", "_", revision)


def open_published(
    store,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> Path:
    """The local store folder of `store`: a Hub location's cached copy, fetched when its commit is not cached yet
    (docs/PUBLISHING.md); any other path as it is. StoreError (one line) when it cannot be had."""
    if not is_hub_store(store):
        return Path(store)
    from filelock import FileLock

    repo_id, revision = parse_hub_store(str(store))
    folder = cached_folder(repo_id, revision)
    with write_errors(folder.parent):
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(folder.parent / f"{folder.name}.lock", thread_local=False)
        lock.acquire()
    try:
        cached = _cached_commit(folder)
        commit = _head(store, repo_id, revision, endpoint, token, cached, say)
        if commit != cached:
            _fetch(store, repo_id, commit, folder, endpoint, token, say)
    finally:
        lock.release()
    return folder


def _cached_commit(folder: Path) -> str | None:
    try:
        return (folder / COMMIT_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _head(store, repo_id: str, revision: str, endpoint, token, cached: str | None, say) -> str:
    """The commit `revision` names now; the cached one, with a note, when the Hub cannot be asked."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    if hub_offline():
        if cached:
            return cached
        raise StoreError(
            f"--store {store}: HF_HUB_OFFLINE is set and no copy is cached; unset it once to fetch the published series"
        )
    try:
        return repo_head(HfApi(endpoint=endpoint, token=token), repo_id, revision)
    except RevisionNotFoundError:
        raise StoreError(f"--store {store}: the dataset repo {repo_id} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise StoreError(
            f"--store {store}: no dataset repo {repo_id} on the Hub (or it is private and no token gives access: "
            "`hf auth login`, or HF_TOKEN)"
        ) from None
    except Exception as e:
        if not (isinstance(e, HfHubHTTPError | OSError) or is_transient(e)):  # httpx's errors: `is_transient`
            raise
        if cached:
            say(f"note: the Hub does not answer ({type(e).__name__}); reading the cached copy, commit {cached[:12]}")
            return cached
        raise StoreError(
            f"--store {store}: the Hub does not answer ({type(e).__name__}) and no copy is cached"
        ) from None


def _fetch(store, repo_id: str, commit: str, folder: Path, endpoint, token, say) -> None:
    """Fetch the files the publication's record lists at `commit` into a folder beside `folder`, check each against
    the record, then swap it in."""
    from huggingface_hub import HfFileSystem
    from huggingface_hub.errors import HfHubHTTPError

    fs = HfFileSystem(endpoint=endpoint, token=token)
    base = f"datasets/{repo_id}@{commit}"
    try:
        raw = fs.cat_file(f"{base}/{PUBLISHED}")
    except FileNotFoundError:
        raise StoreError(
            f"--store {store}: the dataset repo holds no {PUBLISHED}: it is not a series dormant publish wrote"
        ) from None
    files = _listed(store, raw)
    try:
        _fetch_files(store, fs, base, commit, files, raw, folder, say)
    except StoreError:
        raise
    except Exception as e:
        if not (isinstance(e, HfHubHTTPError | OSError) or is_transient(e)):
            raise
        kept = "the cached copy is unchanged" if folder.exists() else "nothing is cached"
        raise StoreError(f"--store {store}: the fetch failed ({type(e).__name__}: {e}); {kept}: run it again") from None


def _fetch_files(store, fs, base: str, commit: str, files: dict[str, str], raw: bytes, folder: Path, say) -> None:
    sizes = {p: fs.info(f"{base}/{p}")["size"] for p in files}
    say(
        f"fetching {store} (commit {commit[:12]}, {len(files)} files, {sum(sizes.values()) / 2**20:.2f} MiB) "
        f"into {folder}"
    )
    sweep_dead_temps(folder.parent)
    tmp = temp_path(folder)
    try:
        for path, sha in files.items():
            target = tmp.joinpath(*PurePosixPath(path).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(f"{base}/{path}", str(target))
            if sha256_file(target) != sha:
                raise StoreError(
                    f"--store {store}: {path} at commit {commit[:12]} differs from the SHA-256 its {PUBLISHED} "
                    "records (changed by hand?); ask its publisher to run dormant publish again"
                )
        (tmp / PUBLISHED).write_bytes(raw)
        (tmp / COMMIT_FILE).write_text(commit + "\n", encoding="utf-8")
        if folder.exists():
            old = temp_path(folder, "old")
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)


def _listed(store, raw: bytes) -> dict[str, str]:
    """The files (path -> sha256) a publication record lists; StoreError when it is not one this release reads."""
    try:
        record = json.loads(raw)
        files = {str(p): str(s) for p, s in record["files"].items()}
        version = int(record["record_version"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise StoreError(f"--store {store}: its {PUBLISHED} is not a publication record of dormant-heads") from None
    if version > RECORD_VERSION:
        raise StoreError(f"--store {store}: published by a newer dormant-heads ({record.get('written_by')}); upgrade")
    unsafe = [p for p in files if PurePosixPath(p).is_absolute() or ".." in PurePosixPath(p).parts or p == PUBLISHED]
    if unsafe:
        raise StoreError(f"--store {store}: its {PUBLISHED} names a path outside the repo ({unsafe[0]})")
    return files
