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


def linked_copy(source: Path, target: Path) -> Path:
    """A copy of the folder `source` (a shared build's store) at `target` whose files are hard links: the store
    writes every file whole to a new name and `os.replace`s it (`dormant_tasks/atomic.py`), never into a file in
    place, so a command run on the copy changes no file of the source. Its lock files (`_locks/*.lock`) are copied:
    a lock is taken on the file itself, and two copies must not share one."""

    def link(src: str, dst: str) -> None:
        if src.endswith(".lock"):
            shutil.copy2(src, dst)
        else:
            os.link(src, dst)

    shutil.copytree(source, target, copy_function=link, symlinks=True)
    return target
