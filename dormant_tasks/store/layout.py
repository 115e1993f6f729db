"""The store's folders and marker (stdlib only, so the command line checks a --store before importing pyarrow).

    <store>/_store.json                                  {"schema_version": 4, "created_by": ...}
    <store>/<table>/series=<slug>/<file_key>.parquet     one folder per table and series (`series_dir`)
    <store>/requests/series=<slug>/<request_id>.json     the request of every run that wrote rows
    <store>/sources/series=<slug>.json                   the source a series is tracked from
    <store>/_locks/<slug>.lock, <slug>.pid               the series lock and its holder (writers' only: readers
                                                         take no lock and ignore "_" and "." names)
    <store>/comparisons.json                             the `dormant compare` folders made from this store
    <store>/_locks/@comparisons.lock                     its writers' lock ("@" is in no slug)
    <store>/_published.json                              a published series (`store.published`): read, never written

The partition key is `series`, a filesystem-safe form of model_id (`series_slug`). `check_store_path` is the
one check of a --store path (its kind, whether it exists where it must, whether a file can be created in it),
`check_store` adds the schema version.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from enum import StrEnum, auto
from pathlib import Path
from typing import Self

from dormant_tasks.atomic import atomic_file, cannot_create_in, write_errors
from dormant_tasks.errors import StoreError
from dormant_tasks.names import series_slug
from dormant_tasks.version import __version__

SCHEMA_VERSION = 4
MARKER = "_store.json"
REQUESTS = "requests"  # <store>/requests/series=<slug>/<request_id>.json: the request of every run
SOURCES = "sources"  # <store>/sources/series=<slug>.json: the source a series is tracked from (its identity)
COMPARISONS = "comparisons.json"  # <store>/comparisons.json: the comparison folders made from the store
PUBLISHED = "_published.json"  # <store>/_published.json: a series laid out by `dormant publish`, opened read-only


class Table(StrEnum):
    """The store's tables, each named here once (docs/DATA_CONTRACT.md): a member is its name, as a str."""

    checkpoints = auto()
    head_scores = auto()
    input_scores = auto()
    transitions = auto()
    head_histories = auto()
    calibration_agreement = auto()
    taus = auto()
    evaluations = auto()
    failed_checkpoints = auto()
    set_aside_checkpoints = auto()
    listed_checkpoints = auto()
    evaluation_items = auto()

    def __repr__(self) -> str:  # messages name a table as they name a str: 'transitions'
        return repr(self.value)


@dataclass(frozen=True)
class StoreFolder:
    """A store folder checked once (`StoreFolder.open`: its marker and schema version), passed down in place of its
    path: every function of the library that takes a store takes it (`os.fspath` gives the folder), and
    `store_folder` does not check it again. `published`: a series laid out by `dormant publish`, read, never written."""

    root: Path
    published: bool
    version: int = SCHEMA_VERSION

    @classmethod
    def open(cls, path) -> Self:
        """The store at `path` (a StoreFolder as it is); StoreError, with the fix, when it is no store of this version."""
        if isinstance(path, cls):
            return path
        root = store_folder(path)
        return cls(root, (root / PUBLISHED).is_file())

    def __fspath__(self) -> str:
        return os.fspath(self.root)

    def __str__(self) -> str:
        return str(self.root)

    def __truediv__(self, name: str) -> Path:
        return self.root / name


def store_folder(path, create: bool = False, allow_old: bool = False) -> Path:
    """The store folder, checked for its schema version; with create=True, made (with its marker) if needed.
    `allow_old` is for `store_upgrade` alone: it opens a store of an older schema version. A `StoreFolder` was checked
    when it was opened: its folder, refused only when `create` asks to write to a publication."""
    if isinstance(path, StoreFolder):
        if create and path.published:
            refuse_published(path.root)
        return path.root
    root = Path(path)
    marker = root / MARKER
    if create and marker.is_file():
        refuse_published(root)
    if not marker.is_file():
        if not create:
            what = "does not exist" if not root.exists() else f"has no {MARKER} (not a dormant store)"
            if pids := running_writers(root):  # a first run holds its lock before its first checkpoint is stored
                raise StoreError(
                    f"store {str(root)!r} is being made by a track run (pid {pids[0]}) that has not stored its first "
                    "checkpoint yet: wait for that checkpoint (or for the run to end), then run this again"
                )
            raise StoreError(
                f"store {str(root)!r} {what}: run `dormant track --model ...` to fill it, or pass the right --store"
            )
        with write_errors(root):
            root.mkdir(parents=True, exist_ok=True)
        write_marker(root)
        return root
    try:
        version = json.loads(marker.read_text(encoding="utf-8"))["schema_version"]
    except (ValueError, KeyError, TypeError) as e:
        raise StoreError(
            f"store marker {str(marker)!r} is unreadable ({e}): restore it or use a new --store folder"
        ) from None
    if version != SCHEMA_VERSION and not allow_old:
        if isinstance(version, int) and version < SCHEMA_VERSION:
            raise StoreError(
                f"store {str(root)!r} has schema_version {version}, this dormant-heads reads {SCHEMA_VERSION}: "
                f"run `dormant store upgrade --store {root}` once (it rewrites the store in place)"
            )
        raise StoreError(
            f"store {str(root)!r} has schema_version {version}, newer than this dormant-heads reads "
            f"({SCHEMA_VERSION}): upgrade dormant-heads, or use another --store folder"
        )
    return root


def store_version(path) -> int:
    """The schema version written in a store's marker (StoreError when there is none)."""
    root = store_folder(path, allow_old=True)
    return json.loads((root / MARKER).read_text(encoding="utf-8"))["schema_version"]


def write_marker(root: Path) -> None:
    with atomic_file(root / MARKER) as f:
        f.write(marker_json())


def marker_json() -> bytes:
    """The marker's bytes, the same for every store this release writes."""
    content = {"schema_version": SCHEMA_VERSION, "created_by": f"dormant-heads {__version__}"}
    return (json.dumps(content, indent=1) + "\n").encode()


def check_store(store, use: str = "any", allow_old: bool = False) -> Path:
    """The library's check of a --store before any work: an existing store's schema version (unless `allow_old`:
    `store upgrade`), then `check_store_path`. A missing store is fine: the first write creates it, so a run that
    fails early leaves no empty store behind."""
    root = Path(store).expanduser()
    if root.is_dir() and any(p.name != "_locks" for p in root.iterdir()):
        store_folder(root, allow_old=allow_old)  # only `_locks`: a first run holds its lock, nothing stored yet
    return check_store_path(store, use)


def running_writers(root: Path) -> list[int]:
    """The pids of the live runs holding a series lock of the store (`lock.hold_series` writes each holder's pid
    beside its lock): a reader's message says a run is writing, instead of what the half-made store looks like."""
    pids = []
    for path in (Path(root) / "_locks").glob("*.pid"):
        try:
            pid = int(path.read_text(encoding="utf-8").strip())
            os.kill(pid, 0)
        except (OSError, ValueError):  # gone, unreadable, or another user's (EPERM: alive, but not ours to say)
            continue
        pids.append(pid)
    return sorted(pids)


def check_store_path(store, use: str = "any") -> Path:
    """The one check of a --store path (stdlib only: the command line runs it before its heavy imports, and
    `check_store` after the schema version). StoreError, naming the path and the fix, when it is empty or a file;
    when it is missing for a command that reads it (`use="reads"`); and, for a command that writes (`"writes"`, or
    `"updates"` while the store does not exist yet: a rerun with nothing to do only reads, so an existing store
    may be read-only), when no file can be created in it or in the folder it will be created in."""
    if not str(store).strip():
        raise StoreError("--store is empty: name a store folder, or leave --store out for ./data/store")
    root = Path(store).expanduser()
    shown = store if root.is_absolute() else f"{store} (in the working folder {Path.cwd()})"
    if root.exists() and not root.is_dir():
        raise StoreError(f"--store {shown} is a file, not a folder: pass a store folder")
    if use == "reads" and not root.exists():
        raise StoreError(
            f"--store {shown} does not exist: pass the right --store, or fill one with `dormant track --model ... --store "
            f"{store}`"
        )
    if use in ("writes", "updates") and root.is_dir():
        refuse_published(root, shown)
    if use == "updates" and root.is_dir() or use not in ("writes", "updates"):
        return root
    folder = root
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise StoreError(f"--store {shown}: {folder} is a file, not a folder; choose another --store")
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        raise StoreError(
            f"--store {shown}: {folder}: Read-only file system; choose another --store, or remount it writable"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"--store {shown}: {folder} is not writable; fix its permissions or choose another --store")
    why = cannot_create_in(folder)
    if why:
        raise StoreError(f"--store {shown}: no file can be created in {folder} ({why}); choose another --store")
    return root


def refuse_published(root, shown=None) -> None:
    """StoreError when the store at `root` is a published series (its `PUBLISHED` record): a copy of what another
    store holds, read by the commands that only read (findings, report, status, compare), never written to."""
    if (Path(root) / PUBLISHED).is_file():
        raise StoreError(
            f"--store {shown or root} is a published series (written by dormant publish): it is read-only; findings, "
            "report, status and compare read it, and a command that writes needs a store of its own (another --store)"
        )


REPAIR_DOES = "it moves damaged files aside, and the next `dormant track` rebuilds what they held"


def damage_fix(root, repair_does: str = REPAIR_DOES) -> str:
    """What fixes a damaged or missing file of the store at `root`, said after its name: `dormant store repair`
    (which `repair_does`) for a store of one's own; a publication is a read-only copy (repair refuses it),
    published again or fetched again."""
    if (Path(root) / PUBLISHED).is_file():
        return (
            "the publication is a read-only copy: publish it again from the store it came from (`dormant publish "
            f"--store SOURCE --out {root}`), or, fetched from an hf:// store, delete {root} and read it again to "
            "fetch it anew"
        )
    return f"run `dormant store repair --store {root}`: {repair_does}"


def comparisons_files(store) -> tuple[Path, Path]:
    """The store's index of the `dormant compare` folders made from it, and its writers' lock file (`outputs`
    reads and writes them)."""
    root = Path(store)
    return root / COMPARISONS, root / "_locks" / "@comparisons.lock"


def series_dir(root: Path, table: str, model_id: str) -> Path:
    return root / table / f"series={series_slug(model_id)}"


def _is_data_file(p: Path) -> bool:
    return p.suffix == ".parquet" and not p.name.startswith((".", "_"))


def data_files(root: Path, table: str, model_id: str | None) -> list[Path]:
    """The data files of a table (one series, or all): regular files inside the store only. A symbolic link, to a
    series folder or to a file, is never followed: what it points to is not the store's to read or delete."""
    return [p for p in _entries(root, table, model_id) if not p.is_symlink() and _is_data_file(p)]


def linked_entries(root: Path, table: str, model_id: str | None) -> list[Path]:
    """The symbolic links where a table's series folders or data files should be (`data_files` skips them)."""
    dirs = _series_dirs(root, table, model_id)
    return [d for d in dirs if d.is_symlink()] + [p for p in _entries(root, table, model_id) if p.is_symlink()]


def _series_dirs(root: Path, table: str, model_id: str | None) -> list[Path]:
    return [series_dir(root, table, model_id)] if model_id is not None else sorted((root / table).glob("series=*"))


def _entries(root: Path, table: str, model_id: str | None) -> list[Path]:
    """What the series folders hold (never what a linked series folder points to)."""
    return [
        p for d in _series_dirs(root, table, model_id) if d.is_dir() and not d.is_symlink() for p in sorted(d.iterdir())
    ]


def series_files(store, table: str, model_id: str) -> list[Path]:
    """Every data file of one series in one table (stale results included): for fingerprints of a series'
    state (the report's reuse stamp), not for reading rows (`read_table` reads through the manifest)."""
    return data_files(Path(store), table, model_id)


def is_store(path) -> bool:
    """True when `path` holds a store's marker file (written by the first write), without raising."""
    return (Path(path) / MARKER).is_file()


PARTS = "_parts"  # <table>/series=<slug>/_parts/: the parts appends add to a derived file (`store.parts`)


def store_root_of(path: Path) -> Path:
    """The store folder of a data file (<store>/<table>/series=<slug>/<file>, or a part of a derived file:
    <store>/<table>/series=<slug>/_parts/<key>/<generation>/<file>)."""
    parents = Path(path).parents
    return parents[5] if len(parents) > 5 and parents[2].name == PARTS else parents[2]


def safe_file_key(file_key: str) -> str:
    """Unsafe characters become "_"; a leading "." or "_" is dropped (readers skip such files)."""
    key = re.sub(r"[^A-Za-z0-9._=-]", "_", str(file_key)).lstrip("._")
    if not key:
        raise StoreError(f"file key {file_key!r} is empty once made filesystem-safe: name the file by revision and run")
    return key
