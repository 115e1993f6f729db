"""Load a model + tokenizer at a revision, in a dtype, on a device; fetch checkpoints from the Hub.

`load_model_and_tokenizer` is the one place that calls `from_pretrained`. Hub revisions are downloaded
pinned to their commit sha with only the files loading needs, after a free-disk check, verified against
the Hub's hashes, retried on transient network errors, and evicted from the cache on failure (and after
use unless kept). Local checkpoint folders are used in place and never evicted.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, TypeVar

import torch

from .checkpoints import UNKNOWN, Revision, is_local_source, parse_revision_name
from .errors import CheckpointError, ConfigError, did_you_mean

log = logging.getLogger(__name__)
T = TypeVar("T")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(device: str = "auto") -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ConfigError(f"unknown device {device!r}; use cpu, cuda or auto")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for but no CUDA GPU is visible; use --device cpu")
    return device


def resolve_dtype(dtype: str) -> torch.dtype:
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ConfigError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}") from None


def load_model_and_tokenizer(path_or_repo: str | Path, revision: str | None = None, dtype: str = "float32",
                             device: str = "auto"):
    """(model in eval mode, tokenizer) from a local folder or a Hub repo at `revision`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = resolve_dtype(dtype)
    device = resolve_device(device)
    where = f"{path_or_repo}" + (f"@{revision}" if revision else "")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path_or_repo), revision=revision)
    except Exception as e:  # transformers raises OSError/ValueError/... for a folder with no tokenizer
        raise CheckpointError(f"{where}: no tokenizer could be loaded ({type(e).__name__}: {str(e).splitlines()[0]}); "
                              "point --model at a checkpoint folder or Hub repo with tokenizer files") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path_or_repo), revision=revision, dtype=torch_dtype)
    except Exception as e:
        raise CheckpointError(f"{where} is not a loadable causal LM ({type(e).__name__}: {str(e).splitlines()[0]}); "
                              "point --model at a checkpoint folder with config.json and safetensors") from None
    return model.to(device).eval(), tokenizer


# ---- Checkpoints of a series: local folders used in place, Hub revisions downloaded pinned to a commit ----

# Only what loading needs: config, generation config, tokenizer files, safetensors weights (+ shard index).
ALLOW_PATTERNS = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                  "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model",
                  "*.safetensors", "*.safetensors.index.json"]


@dataclass
class LoadedCheckpoint:
    """A model + tokenizer in memory. `commit` is the Hub commit sha, or for a local folder the sha256
    content hash of its files (`local_content_hash`)."""

    model: Any
    tokenizer: Any
    revision: Revision
    commit: str
    local_path: Path
    seconds_download: float
    seconds_load: float


def _status(e: BaseException) -> int | None:
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None)


def is_transient(e: BaseException) -> bool:
    """A network failure worth retrying: connection errors, timeouts, 5xx, 408/429, a truncated body.
    Never a missing repo/revision/file, a gated repo or offline mode."""
    from huggingface_hub.errors import (EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError,
                                        OfflineModeIsEnabled, RepositoryNotFoundError, RevisionNotFoundError)

    if isinstance(e, (RepositoryNotFoundError, RevisionNotFoundError, OfflineModeIsEnabled)):
        return False
    if isinstance(e, LocalEntryNotFoundError):  # the HEAD call failed and nothing is cached: a connection problem
        return True
    if isinstance(e, EntryNotFoundError):
        return False
    if isinstance(e, HfHubHTTPError):
        status = _status(e)
        return status is None or status >= 500 or status in (408, 429)
    if isinstance(e, (ConnectionError, TimeoutError)):
        return True
    # httpx/httpcore transport errors (the Hub client's HTTP stack) do not derive from the builtins above.
    if any(c.__name__ in ("TransportError", "TimeoutException") and c.__module__.startswith(("httpx", "httpcore"))
           for c in type(e).__mro__):
        return True
    return isinstance(e, OSError) and "Consistency check failed" in str(e)  # body shorter than announced


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def with_hub_retries(call: Callable[[], T], what: str, retries: int = 3, backoff_s: float = 2.0) -> T:
    """`call()`, retried with exponential backoff (backoff_s, 2*backoff_s, ...) on transient network errors;
    any failure ends as a one-line CheckpointError naming `what` and the fix."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (GatedRepoError, OfflineModeIsEnabled, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    for attempt in range(retries + 1):
        try:
            return call()
        except CheckpointError:
            raise
        except (GatedRepoError, RepositoryNotFoundError) as e:
            gated = "is gated or private: run `hf auth login`" if isinstance(e, GatedRepoError) else \
                "was not found: check the repo id (org/name), or log in with `hf auth login` if it is private"
            raise CheckpointError(f"{what}: the repo on {constants.ENDPOINT} {gated}") from None
        except RevisionNotFoundError:
            raise CheckpointError(f"{what}: no such revision on {constants.ENDPOINT}; "
                                  "run `dormant checkpoints --repo ...` to list the branches") from None
        except OfflineModeIsEnabled:
            raise CheckpointError(f"{what}: HF_HUB_OFFLINE is set; unset it, or use a local checkpoint folder") from None
        except Exception as e:  # noqa: BLE001 - classified below: retried or turned into a CheckpointError
            if _status(e) == 404:  # a server that does not say what is missing (no X-Error-Code header)
                raise CheckpointError(f"{what}: not found on {constants.ENDPOINT}; check the repo id (org/name) "
                                      "and run `dormant checkpoints --repo ...` to list its branches") from None
            if not is_transient(e):
                raise CheckpointError(f"{what} failed ({_one_line(e)})") from e
            if attempt == retries:
                raise CheckpointError(f"{what}: the Hub at {constants.ENDPOINT} did not answer after {retries + 1} "
                                      f"attempts ({_one_line(e)}); check the network and retry") from None
            wait = backoff_s * 2**attempt
            log.warning("%s: transient error (%s); retrying in %.0f s", what, _one_line(e), wait)
            time.sleep(wait)
    raise AssertionError("unreachable")


def repo_cache_dir(repo: str, cache_dir: str | Path | None = None) -> Path:
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    return Path(cache_dir or constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo, repo_type="model")


def evict_revision(repo: str, commit: str, cache_dir: str | Path | None = None) -> int:
    """Delete one revision of `repo` from the HF cache (its snapshot and the blobs no other revision uses).
    Returns the bytes freed; 0 when the revision is not cached."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        cache = scan_cache_dir(cache_dir)
    except CacheNotFound:
        return 0
    cached = [rev.commit_hash for r in cache.repos if r.repo_id == repo and r.repo_type == "model"
              for rev in r.revisions if rev.commit_hash == commit]
    if not cached:
        return 0
    strategy = cache.delete_revisions(*cached)
    strategy.execute()
    log.info("evicted %s@%s from the cache (%s freed)", repo, commit[:10], strategy.expected_freed_size_str)
    return strategy.expected_freed_size


def _free_bytes(folder: Path) -> int:
    existing = folder
    while not existing.exists():
        existing = existing.parent
    return shutil.disk_usage(existing).free


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def _git_blob_sha1(path: Path) -> str:
    """The git object id of a file stored as a plain (non-LFS) blob: sha1 of 'blob <size>\\0' + content."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def local_content_hash(folder: Path) -> str:
    """sha256 over the names and sha256s of a local checkpoint's loadable files: its `commit` in the store."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and any(fnmatch(p.name, a) for a in ALLOW_PATTERNS))
    return _content_hash(tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))


@functools.lru_cache(maxsize=4096)
def _content_hash(files: tuple[tuple[str, int, int], ...]) -> str:
    """Cached per (path, size, mtime) of every file: a run checks each checkpoint's hash more than once."""
    h = hashlib.sha256()
    for path, _, _ in files:
        h.update(f"{Path(path).name}\0{_sha256(Path(path))}\n".encode())
    return h.hexdigest()


def fetch_revision(source: str | Path, revision: Revision, cache_dir: str | Path | None = None,
                   retries: int = 3, backoff_s: float = 2.0) -> Path:
    """The folder holding `revision`'s files: a local checkpoint folder as is, or a Hub revision downloaded
    into the HF cache pinned to its commit (only `ALLOW_PATTERNS`; free disk checked first; every file's
    hash checked against the Hub's metadata). A failed download evicts the revision: nothing partial stays."""
    if revision.path is not None:
        return Path(revision.path)
    from huggingface_hub import HfApi, snapshot_download

    repo = str(source)
    api = HfApi()
    where = f"{repo}@{revision.name}"
    commit = revision.commit or _resolve_branch(api, repo, revision.name, retries, backoff_s)
    where = f"{repo}@{revision.name} ({commit[:10]})"
    files = [f for f in with_hub_retries(lambda: list(api.list_repo_tree(repo, revision=commit, recursive=True)),
                                         f"listing the files of {where}", retries, backoff_s)
             if hasattr(f, "blob_id") and any(fnmatch(f.path, p) for p in ALLOW_PATTERNS)]
    if not any(f.path.endswith(".safetensors") for f in files) or not any(f.path == "config.json" for f in files):
        raise CheckpointError(f"{where} has no config.json + safetensors weights (found: "
                              f"{', '.join(f.path for f in files) or 'none'}); only safetensors checkpoints load")
    snapshot = repo_cache_dir(repo, cache_dir) / "snapshots" / commit
    check_free_disk(where, [f for f in files if not (snapshot / f.path).exists()], snapshot)

    def download() -> Path:
        return Path(snapshot_download(repo, revision=commit, allow_patterns=ALLOW_PATTERNS, cache_dir=cache_dir))

    try:
        path = with_hub_retries(download, f"downloading {where}", retries, backoff_s)
        verify_files(where, path, files)
    except BaseException:  # also KeyboardInterrupt: the cache keeps no half revision
        evict_revision(repo, commit, cache_dir)
        raise
    return path


def _resolve_branch(api, repo: str, name: str, retries: int, backoff_s: float) -> str:
    """The commit a branch or tag points to, from the repo's ref list (names are never guessed)."""
    refs = with_hub_retries(lambda: api.list_repo_refs(repo), f"listing the branches of {repo}", retries, backoff_s)
    commits = {r.name: r.target_commit for r in [*refs.branches, *refs.tags]}
    if name not in commits:
        raise CheckpointError(f"{repo}@{name}: no such branch or tag{did_you_mean(name, commits)}; "
                              f"run `dormant checkpoints --repo {repo}` to list its checkpoints")
    return commits[name]


def check_free_disk(where: str, missing: list, snapshot: Path) -> None:
    sizes = [f.size for f in missing]
    if any(s is None for s in sizes):
        log.info("%s: the server gives no file sizes; free disk space is not checked before downloading", where)
        return
    needed, free = sum(sizes), _free_bytes(snapshot)
    if needed > free:
        raise CheckpointError(f"{where} needs {needed / 1e9:.2f} GB but {snapshot.parents[2]} has "
                              f"{free / 1e9:.2f} GB free; pass --cache-dir on a larger disk or free space")


def verify_files(where: str, path: Path, files: list) -> None:
    """Every file against the Hub's own hash of it: sha256 for LFS files, the git blob id otherwise
    (huggingface_hub only checks sizes)."""
    for f in files:
        local = path / f.path
        expected, actual = (f.lfs.sha256, _sha256(local)) if f.lfs is not None else (f.blob_id, _git_blob_sha1(local))
        if actual != expected:
            raise CheckpointError(f"{where}: {f.path} is corrupt (hash {actual[:12]} instead of {expected[:12]}); "
                                  "it was removed from the cache, retry the download")


def load_checkpoint(source: str | Path, revision: Revision, dtype: str = "float32", device: str = "auto",
                    cache_dir: str | Path | None = None, keep: bool = True) -> LoadedCheckpoint:
    """Fetch `revision` of `source` and load it. With `keep=False` a Hub revision's files are evicted from the
    cache once the model is in memory; local folders are never touched."""
    t0 = time.perf_counter()
    path = fetch_revision(source, revision, cache_dir)
    t1 = time.perf_counter()
    model, tokenizer = load_model_and_tokenizer(path, None, dtype, device)
    t2 = time.perf_counter()
    if revision.path is not None:
        commit = local_content_hash(path)
    else:
        commit = path.name  # the snapshot folder is named by the commit sha it was pinned to
        if not keep:
            evict_revision(str(source), commit, cache_dir)
    return LoadedCheckpoint(model, tokenizer, revision, commit, path, t1 - t0, t2 - t1)


def load_model_at(path_or_repo: str | Path, revision: str | None = None, dtype: str = "float32",
                  device: str = "auto", cache_dir: str | Path | None = None):
    """(model, tokenizer) of one checkpoint: a local folder in place, or a Hub branch/tag (default `main`)
    downloaded through `fetch_revision`, i.e. pinned to its commit, disk-checked and hash-checked."""
    if is_local_source(path_or_repo):
        return load_model_and_tokenizer(path_or_repo, revision, dtype, device)
    name = revision or "main"
    rev = parse_revision_name(name) or Revision(name, UNKNOWN, UNKNOWN, UNKNOWN)
    loaded = load_checkpoint(str(path_or_repo), rev, dtype, device, cache_dir)
    return loaded.model, loaded.tokenizer
