"""Atomic writes: a file appears whole under its final name or not at all (temp file in the same folder,
fsync, `os.replace`), and OS errors of a write said as a `StoreError` that names the folder and the fix.

A leaf (stdlib only): the store, the tiny pretraining run and the CLI's output files all write through it.
A temp file left by a killed writer is hidden (its name starts with ".") and swept by the next write to that
folder from the same host.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from dormant_tasks.errors import USER_ERRNOS, StoreError


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _temp_path(final: Path) -> Path:
    # Hidden (readers skip "."), names its writer so that a leftover of a dead writer can be swept.
    return final.with_name(f".{final.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def sweep_dead_temps(folder: Path) -> None:
    """Remove temp files that writers on this host left when killed (their pid no longer runs)."""
    host = _host()
    for p in folder.glob(".*.tmp"):
        parts = p.name.rsplit(".", 4)  # [.name, host, pid, rand, tmp]
        if len(parts) != 5 or parts[1] != host or not parts[2].isdigit():
            continue
        try:
            os.kill(int(parts[2]), 0)
        except ProcessLookupError:
            p.unlink(missing_ok=True)
        except PermissionError:  # alive, another user's
            pass


@contextlib.contextmanager
def atomic_file(final: Path) -> Iterator:
    """An open binary file that becomes `final` only when the block ends without error (temp file in the
    same folder, fsync, os.replace): readers see no file or a whole one, never a partial one."""
    final = Path(final)
    tmp = _temp_path(final)
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
