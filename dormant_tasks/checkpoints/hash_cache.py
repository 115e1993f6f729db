"""A per-file sha256 cache shared by every process of this user (docs/CHECKPOINTS.md §7): a rerun never re-reads a
file it has hashed.

`file-sha256.sqlite` under `cache_dir()`, keyed by (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns): the inode,
not the path, so a file's hard links hash once. The ctime is what catches an in-place rewrite whose size and mtime
were put back (`touch -r`): every write, link and utime sets it, and no user call can set it back. A file whose
mtime is within `RACY_S` of now, or whose stat changed while it was read, is hashed but not stored (git's "racy"
entries). The cache is an optimisation only: an unusable cache dir or database means hashing without it (logged
at debug level), never a failed run. Stdlib only.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

DB_NAME = "file-sha256.sqlite"
RACY_S = 2.0  # a file modified this recently is not stored: a same-size rewrite in the same tick keeps its mtime
TIMEOUT_S = 10.0  # sqlite's busy timeout: concurrent `track` runs wait for each other's writes

# `_v2`: the key gained ctime_ns; a database of the older table is left as it is (its rows are never read)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS file_sha256_v2 (
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    path TEXT NOT NULL,
    PRIMARY KEY (dev, ino, size, mtime_ns, ctime_ns)
)
"""

_local = threading.local()  # one connection per (thread, process, database): sqlite connections stay in their thread


def cache_dir() -> Path:
    """$DORMANT_CACHE_DIR, else $XDG_CACHE_HOME/dormant-heads, else ~/.cache/dormant-heads (empty values unset)."""
    env = os.environ
    return _cache_dir(env.get("DORMANT_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))


@functools.lru_cache(maxsize=16)
def _cache_dir(explicit: str | None, xdg: str | None, home: str | None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    if xdg:
        return Path(xdg).expanduser() / "dormant-heads"
    return Path.home() / ".cache" / "dormant-heads"


def db_path() -> Path:
    return _db_path(cache_dir())


@functools.lru_cache(maxsize=16)
def _db_path(folder: Path) -> Path:
    return folder / DB_NAME


def _i64(n: int) -> int:
    """An unsigned 64-bit stat field (some filesystems give inodes >= 2**63) as the signed integer sqlite stores."""
    return n - (1 << 64) if n >= 1 << 63 else n


def _key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (_i64(st.st_dev), _i64(st.st_ino), st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _connection(path: Path) -> sqlite3.Connection | None:
    """This thread's connection to the database at `path`, opened (and the table created) on first use; None,
    remembered for the rest of the process, when the database cannot be opened or read."""
    conns = getattr(_local, "conns", None)
    if conns is None or getattr(_local, "pid", None) != os.getpid():  # never reuse a connection across fork
        conns = _local.conns = {}
        _local.pid = os.getpid()
    key = str(path)
    if key in conns:
        return conns[key]
    conn = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=TIMEOUT_S, isolation_level=None)  # autocommit: one statement each
        conn.execute(_SCHEMA)
        conn.execute("SELECT 1 FROM file_sha256_v2 LIMIT 1").fetchall()  # a corrupt file fails here, not later
    except Exception as e:  # OSError, sqlite3.Error, ...: the cache must never fail a run
        log.debug("file hash cache %s unusable, hashing without it: %s: %s", path, type(e).__name__, e)
        if conn is not None:
            conn.close()
        conn = None
    conns[key] = conn
    return conn


def cached_sha256(path: Path, compute: Callable[[Path], str]) -> str:
    """sha256 of the file at `path`: from the cache when its (dev, inode, size, mtime, ctime) is there, else
    `compute(path)`, stored for the next process. Any cache failure falls back to `compute(path)`."""
    st = os.stat(path)
    key = _key(st)
    conn = _connection(db_path())
    if conn is not None:
        try:
            row = conn.execute(
                "SELECT sha256 FROM file_sha256_v2 WHERE dev=? AND ino=? AND size=? AND mtime_ns=? AND ctime_ns=?", key
            ).fetchone()
            if row is not None:
                return row[0]
        except Exception as e:
            log.debug("file hash cache lookup of %s failed: %s: %s", path, type(e).__name__, e)
    digest = compute(path)
    if conn is None:
        return digest
    after = os.stat(path)
    if _key(after) != key:
        log.debug("%s changed while it was hashed; its hash is not cached", path)
    elif time.time_ns() - st.st_mtime_ns < RACY_S * 1e9:
        log.debug("%s was modified less than %.0f s ago; its hash is not cached", path, RACY_S)
    else:
        try:
            conn.execute(
                "INSERT OR REPLACE INTO file_sha256_v2 VALUES (?, ?, ?, ?, ?, ?, ?)", (*key, digest, str(path))
            )
        except Exception as e:  # sqlite3.Error (read-only, locked, full), an unencodable path, ...
            log.debug("file hash cache write of %s failed: %s: %s", path, type(e).__name__, e)
    return digest
