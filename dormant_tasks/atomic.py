"""Atomic writes: a file appears whole under its final name or not at all (temp file in the same folder,
fsync, `os.replace`), and OS errors of a write said as a `StoreError` that names the folder and the fix.

A leaf (stdlib only): the store, the tiny pretraining run and the CLI's output files all write through it.
A temp file or staging folder left by a killed writer is hidden (its name starts with ".") and names its writer
(host and pid): the next write to that folder from the same host, and the next run that holds the series
(`store.hold_series`), remove what writers that no longer run left (`sweep_dead_temps`), never a live writer's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from dormant_tasks.errors import USER_ERRNOS, StoreError


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


TEMP_KINDS = ("tmp", "old")  # a file or folder being written; a published folder's predecessor being deleted


def temp_path(final: Path, kind: str = "tmp") -> Path:
    """A hidden name beside `final` (readers skip "."), naming its writer so that a leftover of a dead writer can be
    swept: `.NAME.HOST.PID.RAND.KIND`."""
    return final.with_name(f".{final.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.{kind}")


def sweep_dead_temps(folder: Path, before: float | None = None) -> list[Path]:
    """Remove the temp files and folders (`temp_path`) in `folder` that writers on this host left when killed: their
    pid no longer runs (and, given `before`, they are older than it). A live writer's, another host's (a shared disk)
    and any other name are kept. Returns what was removed."""
    host = _host()
    removed = []
    for p in folder.glob(".*.*.*.*.*") if folder.is_dir() else ():
        parts = p.name.rsplit(".", 4)  # [.name, host, pid, rand, kind]
        if len(parts) != 5 or parts[4] not in TEMP_KINDS or parts[1] != host or not parts[2].isdigit():
            continue
        if _runs(int(parts[2])):
            continue
        try:
            if before is not None and p.lstat().st_mtime >= before:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        except OSError:  # another run swept it first, or it is not ours to remove: the run goes on without it
            continue
        removed.append(p)
    return removed


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


@contextlib.contextmanager
def atomic_file(final: Path) -> Iterator:
    """An open binary file that becomes `final` only when the block ends without error (temp file in the
    same folder, fsync, os.replace): readers see no file or a whole one, never a partial one."""
    final = Path(final)
    tmp = temp_path(final)
    try:
        with write_errors(final.parent), open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        with write_errors(final.parent):
            os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def write_errors(folder: Path) -> Iterator[None]:
    """OS errors of a write as a StoreError that names the folder and the fix (a full disk is not retried)."""
    try:
        yield
    except OSError as e:
        if e.errno not in USER_ERRNOS:
            raise
        raise StoreError(
            f"cannot write to {str(folder)!r}: {e.strerror}; free space, fix its permissions, "
            "or choose another folder (what was written before is intact)"
        ) from e


def cannot_create_in(folder: Path) -> str | None:
    """Why no file can be created in the existing `folder` (None when one can): a real, removed probe written and
    synced, since neither permissions nor the mount flags tell about /proc, a FUSE mount or a full disk."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".dormant-probe-") as probe:
            probe.write(b"probe")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as e:
        return e.strerror or type(e).__name__
    return None
