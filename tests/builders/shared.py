"""What is built once per pytest run and shared by its processes (the xdist workers of `make test`)."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

from filelock import FileLock


def shared_folder(tmp_path_factory) -> Path:
    """A folder that every process of this pytest run sees (under `make test`, the xdist workers' common base
    temp), for what is built once per run, under a file lock, and then read by any worker (`built_once`)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build) -> object:
    """`build(folder)`'s result, computed by the first process of the run that asks (the others wait on the lock)
    and kept, pickled, beside its folder for the rest."""
    root = shared_folder(tmp_path_factory)
    done = root / f"{name}.pickle"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            folder = root / name
            shutil.rmtree(folder, ignore_errors=True)  # what a build that failed in another process left
            folder.mkdir()
            done.write_bytes(pickle.dumps(build(folder)))
    return pickle.loads(done.read_bytes())
