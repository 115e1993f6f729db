"""One writer per series: `hold_series` (a whole run) and `series_lock` (one write, re-entrant within a run), both
on `<store>/_locks/<slug>.lock` through `filelock` (flock on POSIX, a byte-range lock on Windows: the kernel
releases it when the holding process ends, however it ends). Readers take no lock, and importing this module
imports no lock library: a store is read on any platform, written where `filelock` works."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from dormant_tasks.atomic import atomic_file, sweep_dead_temps
from dormant_tasks.errors import StoreError
from dormant_tasks.names import series_slug
from dormant_tasks.store.layout import MARKER, check_store, refuse_published, store_folder


@contextlib.contextmanager
def series_lock(store, model_id: str) -> Iterator[None]:
    """Exclusive lock on one series around one check-then-write, released on exit.

    Inside `hold_series` (a whole run of this process holds the series) it only orders this process's
    threads; otherwise it takes the series' lock file as `hold_series` does, for this write alone.
    Re-entrant within a thread.
    """
    root = store_folder(store, create=True)
    path = _lock_path(root, model_id)
    held = _held()
    if path in held:  # re-entered by the thread that holds it (a second lock of the file would wait for itself)
        yield
        return
    run = _RUNS.get(path)
    with contextlib.ExitStack() as stack:
        if run is not None:
            stack.enter_context(run.threads)
        else:
            try:
                stack.enter_context(_file_lock(root, model_id, path, wait=True))
            except _CannotLock as e:
                cause = e.__cause__
                why = cause.strerror if isinstance(cause, OSError) and cause.strerror else "cannot make its lock file"
                raise StoreError(
                    f"cannot write to {str(path.parent)!r}: {why}; free space, fix its permissions, or choose "
                    "another folder (what was written before is intact)"
                ) from None
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)


@dataclasses.dataclass
class _Run:
    """A series this process holds for a whole run (`hold_series`): its writes are ordered by `threads`."""

    depth: int = 0
    threads: threading.Lock = dataclasses.field(default_factory=threading.Lock)


_RUNS_LOCK = threading.Lock()


@contextlib.contextmanager
def hold_series(store, model_id: str, *, wait: bool = True) -> Iterator[None]:
    """Hold one series for a whole run, from its consistency checks to its last write (`dormant track`, `--retau`,
    `store repair`, `store gc`): one writer per series.

    The lock is `filelock.FileLock` on <store>/_locks/<slug>.lock, which works between the processes of one host
    and is released by the kernel when its holder ends, however it ends (SIGINT, SIGKILL: no stale lock). The
    holder writes its pid beside it (`<slug>.pid`). Another run waits, with a line on stderr at once and at least
    every 20 s ("waiting for another run on SERIES (pid N)"), or with `wait=False` is refused in one line.
    Re-entrant within the process (the flow inside the CLI's run). A store that does not exist yet gets only
    its lock folder, removed again (with the store folder it made) when the run stored nothing; a read-only store
    is not locked (it cannot be written). `series_lock` inside it orders this process's threads. Taking it, a run
    first removes the temp files that killed writers left in the store (`sweep_killed_writers`).
    """
    root = Path(store)
    refuse_published(root)  # a published series is read, never written (not even its lock folder)
    path = _lock_path(root, model_id)
    with _RUNS_LOCK:
        run = _RUNS.get(path)
        if run is not None:
            run.depth += 1
    if run is not None:
        try:
            yield
        finally:
            with _RUNS_LOCK:
                run.depth -= 1
        return
    try:
        check_store(root)
    except StoreError:  # a store this release cannot write (another schema version): the run's own checks refuse it
        yield
        return
    new = not root.exists()
    try:
        lock = _file_lock(root, model_id, path, wait=wait)
        lock.__enter__()
    except _CannotLock:
        yield  # nothing can be written there: the run refuses any write in one line (`check_store(store, "writes")`)
        return
    try:
        with _RUNS_LOCK:
            _RUNS[path] = _Run(depth=1)
        sweep_killed_writers(root)
        yield
    finally:
        with _RUNS_LOCK:
            _RUNS.pop(path, None)
        if not (root / MARKER).is_file():  # nothing stored: no lock folder (nor a store folder it made) left behind
            # Removed while held: a run that opened this file before cannot hold it after us (filelock takes no
            # lock on a file without a name), and one that comes later makes it again.
            _pid_path(path).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
            for folder in (path.parent, root) if new else (path.parent,):
                with contextlib.suppress(OSError):
                    folder.rmdir()
        lock.__exit__(None, None, None)


def holds_series(store, model_id: str) -> bool:
    """Whether this process holds the series for a run (`hold_series`): a reader that may store what it derived
    (a pending decision) does so only then; a plain read takes no lock and writes nothing."""
    path = _lock_path(Path(store), model_id)
    with _RUNS_LOCK:
        return path in _RUNS


class _CannotLock(Exception):
    """The lock file cannot be made: a read-only store, a path that is no folder."""


def _lock_path(root: Path, model_id: str) -> Path:
    return (root / "_locks" / f"{series_slug(model_id)}.lock").absolute()


def _pid_path(path: Path) -> Path:
    """Where the holder of the lock file `path` writes its pid (not into the lock file, which filelock may
    truncate or lock against reads)."""
    return path.with_suffix(".pid")


@contextlib.contextmanager
def _file_lock(root: Path, model_id: str, path: Path, wait: bool) -> Iterator[None]:
    """The series' lock file held, its holder's pid beside it. Tried once without waiting: held by another run,
    a StoreError (`wait=False`) or a wait with a progress line. _CannotLock when the lock file cannot be made."""
    from filelock import FileLock, Timeout

    from dormant_tasks.progress import LogProgress

    lock = FileLock(path, thread_local=False)  # released by whichever thread leaves the run
    waiting = None
    removed = 0
    try:
        while True:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                lock.acquire(blocking=waiting is not None)
                break
            except Timeout:
                holder = _holder(path)
                if not wait:
                    raise StoreError(
                        f"another run is writing series {model_id} of {str(root)!r} ({holder}); wait for it to end, "
                        "or run without --no-wait to wait for it"
                    ) from None
                waiting = LogProgress(desc=f"waiting for another run on {model_id} ({holder})", unit="")
            except FileNotFoundError as e:  # its last holder removed the folder (a store never written): made again
                removed += 1
                if removed > 100:
                    raise _CannotLock from e
            except OSError as e:
                raise _CannotLock from e
    finally:
        if waiting is not None:
            waiting.close()
    try:
        _write_pid(_pid_path(path))
        yield
    finally:
        with contextlib.suppress(OSError):
            _pid_path(path).unlink(missing_ok=True)
        lock.release()


def _write_pid(path: Path) -> None:
    """The holder's pid, for the waiting run's message: written whole (`atomic_file`), never required."""
    with contextlib.suppress(OSError, StoreError), atomic_file(path) as f:
        f.write(f"{os.getpid()}\n".encode())


def _holder(path: Path) -> str:
    try:
        pid = _pid_path(path).read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "pid unknown"


_LOCAL = threading.local()


def _held() -> set[Path]:
    """The series locks the current thread holds."""
    if not hasattr(_LOCAL, "held"):
        _LOCAL.held = set()
    return _LOCAL.held


_RUNS: dict[Path, _Run] = {}


def sweep_killed_writers(root: Path) -> list[Path]:
    """Remove the temp files that writers on this host left anywhere in the store when killed (SIGKILL, the OOM
    killer: no clean-up ran): `atomic.sweep_dead_temps`, which keeps a live writer's (another
    series' run, another process) by its pid. Returns what was removed."""
    folders = {p.parent for p in Path(root).rglob(".*.tmp")}
    return [p for folder in sorted(folders) for p in sweep_dead_temps(folder)]
