"""A file's digest, read in 16 MiB chunks so that a multi-GB checkpoint shard never sits in memory whole: the store
checks its files with it, and the checkpoints part hashes downloads with it (behind its persistent cache)."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK_BYTES = 16 << 20


def hash_file(h, path: Path) -> str:
    """The hex digest of `h` (a hashlib object, possibly fed a prefix already) after the file's bytes."""
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    return hash_file(hashlib.sha256(), path)
