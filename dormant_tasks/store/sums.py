"""Whole-file checksums of the store's files that no manifest row names: each series' manifest itself and its
taus, derived tables, evaluations and failed checkpoints (`<store>/_sums/series=<slug>.json`).

A result's head_scores and input_scores files have their sha256 and size in their manifest row; every other
file is recorded here by the write that makes it (`write_parquet`, the store's one write path for them), so that
a flipped byte anywhere in it, its footer included (a column renamed `confidenu` reads as a null `confident`
and passes every page checksum), is named as damage rather than read as other values.

The record is written before the file is renamed into place and keeps the checksum of the bytes it replaces
beside the new one, so a writer killed between the two leaves a file that still matches. No record (a store
written before checksums, a file added by hand): not checked, counted by `dormant status --verify`, and
recorded by `dormant store repair` once the file is found whole. Readers ignore "_" folders.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dormant_tasks.atomic import atomic_file, write_errors
from dormant_tasks.errors import StoreError
from dormant_tasks.hashing import sha256_file
from dormant_tasks.names import series_slug

SUMS = "_sums"  # <store>/_sums/series=<slug>.json: {"files": {relative path: [[sha256, bytes], ...]}}

Entry = list[list]  # the accepted (sha256, bytes) of one file: the newest first, at most two


def sums_path(root: Path, model_id: str) -> Path:
    return Path(root) / SUMS / f"series={series_slug(model_id)}.json"


def _load(root: Path, model_id: str) -> tuple[dict[str, Entry], str | None]:
    """(the recorded checksums by path relative to the store, why the record cannot be read or None)."""
    path = sums_path(root, model_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except OSError as e:
        raise StoreError(f"cannot read {str(path)!r}: {e.strerror}; fix its permissions") from None
    try:
        files = json.loads(text)["files"]
    except (ValueError, KeyError, TypeError) as e:
        return {}, f"not a checksum record: {type(e).__name__}"
    whole = isinstance(files, dict) and all(
        isinstance(v, list) and v and all(isinstance(x, list) and len(x) == 2 for x in v) for v in files.values()
    )
    return (files, None) if whole else ({}, "not a checksum record")


def read_sums(root: Path, model_id: str) -> dict[str, Entry]:
    """A series' recorded checksums by path relative to the store ({} when none). A damaged record reads as none:
    `sums_damage` names it for `damaged_files`, and it never stops the repair that records it again."""
    return _load(root, model_id)[0]


def sums_damage(root: Path, model_id: str) -> str | None:
    """Why a series' checksum record cannot be read (None: it is whole, or there is none)."""
    return _load(root, model_id)[1]


def _write_sums(root: Path, model_id: str, files: dict[str, Entry]) -> None:
    path = sums_path(root, model_id)
    with write_errors(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as f:
        f.write(sums_json(files))


def sums_json(files: dict[str, Entry]) -> bytes:
    """The record's bytes: the same files give the same bytes (a published series' record, `store.published`)."""
    return (json.dumps({"files": dict(sorted(files.items()))}, indent=0) + "\n").encode()


def record_sums(root: Path, model_id: str, sums: dict[Path, tuple[str, int]], *, keep_old: bool = False) -> None:
    """Record the checksum and size of files of a series (absolute paths inside `root`); `keep_old` keeps the
    newest one recorded before beside it (the write of those files is still to be renamed into place)."""
    root = Path(root)
    with _record_lock(root, model_id):
        files = _load(root, model_id)[0]  # a damaged record starts again from these files (repair adds the rest)
        for path, (sha, size) in sums.items():
            key = path.relative_to(root).as_posix()
            entry = [[sha, size]]
            old = files.get(key, [])
            if keep_old and old and old[0] != entry[0]:
                entry.append(old[0])
            files[key] = entry
        _write_sums(root, model_id, files)


def forget_sums(root: Path, model_id: str, paths: list[Path]) -> None:
    """Drop the recorded checksums of files deleted by the store (a derived file's folded parts)."""
    root = Path(root)
    with _record_lock(root, model_id):
        files, damage = _load(root, model_id)
        if damage is None:
            for path in paths:
                files.pop(Path(path).relative_to(root).as_posix(), None)
            _write_sums(root, model_id, files)


@contextlib.contextmanager
def _record_lock(root: Path, model_id: str) -> Iterator[None]:
    """The record's own lock, held for one read-modify-write (milliseconds): writers that do not hold the series
    (an evaluation beside a running `track`) never wait for a whole run, and no update is lost."""
    from filelock import FileLock

    path = root / "_locks" / f"{series_slug(model_id)}.sums.lock"
    with write_errors(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(path, thread_local=False)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def write_parquet(root: Path, model_id: str, path: Path, t: pa.Table, options: dict) -> str:
    """Write `t` to `path` (a file of `model_id` in the store at `root`) atomically, its checksum recorded first
    (module docstring); the file's sha256."""
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink, **options)
    data = sink.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    record_sums(root, model_id, {path: (sha, data.size)}, keep_old=True)
    with atomic_file(path) as f:
        f.write(data)
    return sha


def sum_mismatch(path: Path, entry: Entry | None, *, content: bool = True) -> str | None:
    """Why `path` differs from its recorded checksum (None: it matches one, or nothing is recorded); with
    `content=False`, its size alone."""
    if not entry:
        return None
    size = path.stat().st_size
    if all(size != s for _, s in entry):
        return f"{size} bytes, the store recorded {entry[0][1]}"
    if content and sha256_file(path) not in {sha for sha, _ in entry}:
        return "its content checksum differs from the one the store recorded"
    return None


def recorded_entry(root: Path, files: dict[str, Entry], path: Path) -> Entry | None:
    return files.get(Path(path).relative_to(root).as_posix())
