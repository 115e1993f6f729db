"""What the tool writes outside its store: report, findings and comparison folders, and `score --out` files.

One rule for all of them: nothing the tool did not write is ever replaced. A folder is ours to write only if it is
new, empty, or holds our marker (`OUTPUT_MARKER`: kind, store, series and the manifest of the files written there),
of the same kind, store and series; even then only the files in its manifest are replaced or removed, so a folder
holding anything else (a file or folder the user added, any symbolic link: the tool writes none) is refused. A
folder without the marker is never adopted, whatever its files are called: the user's own index.html is not ours.
A report belongs to the store it came from: another store's run is refused, never written over it. The store, a
folder inside it or one that holds it, and the working folder or one above it are never output folders. A file
(`score --out`) is written only if it is new or one this tool wrote (`OWNER_KEY` in its Parquet metadata).
Everything else is one line naming the option and the fix.

The store keeps the record of the comparison folders made from it (`record_comparison`, `stored_comparisons`),
so that nothing is written beside a folder the user named, and a series' report finds its comparisons.

Stdlib only (pyarrow only for an existing `--out` file, filelock only to record a comparison), so the CLI checks
before any work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

from dormant_tasks.atomic import atomic_file, sweep_dead_temps, temp_path, write_errors
from dormant_tasks.errors import USER_ERRNOS, ConfigError
from dormant_tasks.paths import default_reports_dir
from dormant_tasks.store import comparisons_files, refuse_published, store_folder
from dormant_tasks.version import __version__

OUTPUT_MARKER = ".dormant-report.json"  # in every folder the tool publishes: what it is, from which store and series
OWNER_KEY = b"dormant_heads"  # the Parquet schema metadata key of a file the tool wrote
# What a report or findings folder held before the marker existed: such a folder is refused with its own fix.
_OLD_OUTPUT = {"index.html", "summary.md", "inputs.json", "findings.md", "figures"}
# A write that failed for want of room: a full disk or quota, or a file size limit (`ulimit -f`).
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


@dataclass(frozen=True)
class Owner:
    """Whose output a folder is: `kind` ("report", "findings", "comparison"), the store's resolved path, the
    series."""

    kind: str
    store: str
    series: str

    @classmethod
    def of(cls, kind: str, store, series: str) -> Owner:
        return cls(kind, str(Path(store).resolve()), series)

    def describe(self) -> str:
        return f"the {self.kind} of {self.series} from store {self.store}"


def check_folder(out, owner: Owner, option: str = "--reports-dir", default: bool = False) -> Path:
    """The resolved folder `out`, when `owner`'s output may be published there; else a one-line ConfigError.
    `default`: `out` is the default folder, not one the user named (the line says so)."""
    given = str(out)
    path = Path(out).resolve()
    store = Path(owner.store)
    where = f"the default {option} {given}" if default else f"{option} {given}"
    if path == store or store in path.parents:
        raise ConfigError(
            f"{where} is {'the' if path == store else 'inside the'} store {store}: name a folder outside it"
        )
    if path in store.parents:
        raise ConfigError(f"{where} holds the store {store}: name a folder outside it, e.g. reports/")
    cwd = Path.cwd().resolve()
    if path == cwd or path in cwd.parents:
        raise ConfigError(f"{where} is the working folder{'' if path == cwd else ' or above it'}: name a subfolder")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{where} is a file, not a folder: name a new folder (it is never replaced)")
    if not path.is_dir():
        return path
    found = marker_of(path)
    if found is None:
        entries = sorted(p.name for p in path.iterdir())
        if not entries:
            return path
        if set(entries) <= _OLD_OUTPUT and {"index.html", "findings.md"} & set(entries):
            raise ConfigError(
                f"{where} has no {OUTPUT_MARKER}: it looks like a report, but dormant-heads cannot tell that it "
                f"wrote it; delete {given} if it is an old report of dormant-heads, or name a new folder with "
                f"{option} (nothing there is replaced)"
            )
        _refuse_foreign(where, option, entries[0])
    if found[0] != owner:
        raise ConfigError(
            f"{where} holds {found[0].describe()}, not {owner.describe()}: name another {option} "
            f"(an output belongs to its store and series), or delete {given} first"
        )
    foreign = _not_listed(path, found[1])
    if foreign:  # a marked folder the user added to: replacing it would lose what they added
        _refuse_foreign(where, option, foreign[0])
    return path


def _refuse_foreign(where: str, option: str, example: str) -> NoReturn:
    raise ConfigError(
        f"{where} holds files dormant-heads did not write (e.g. {example}): name a new or empty folder with "
        f"{option}; nothing there is replaced"
    )


def _entries(folder: Path) -> tuple[list[str], list[str]]:
    """(files and links, folders) under `folder` as relative POSIX paths; a linked folder is a link, never
    entered."""
    files: list[str] = []
    folders: list[str] = []
    for top, dirs, names in os.walk(folder, followlinks=False):
        rel = Path(top).relative_to(folder)
        for d in dirs:
            (files if Path(top, d).is_symlink() else folders).append((rel / d).as_posix())
        files += [(rel / n).as_posix() for n in names]
    return files, folders


def _not_listed(folder: Path, manifest: set[str]) -> list[str]:
    """What `folder` holds beyond its manifest (and the marker), sorted: a file or folder it does not list, and
    every symbolic link (the tool writes none, so a link is the user's even where a listed file was)."""
    files, folders = _entries(folder)
    ours = {p.as_posix() for f in manifest for p in Path(f).parents if p != Path(".")}
    extra = [f for f in files if f not in manifest and f != OUTPUT_MARKER or (folder / f).is_symlink()]
    return sorted(extra + [d for d in folders if d not in ours])


def report_folder(model_id: str, out_dir=None) -> Path:
    """Where a series' report goes: `out_dir`, else <$DORMANT_REPORTS or ./reports>/<series slug>/."""
    from dormant_tasks.names import series_slug

    return Path(out_dir) if out_dir is not None else default_reports_dir() / series_slug(model_id)


def check_report_folder(store, model_id: str, out_dir=None) -> Path:
    """`check_folder` of a series' report folder (`report_folder`): what `track`, `demo` and `report` ask first."""
    return check_folder(report_folder(model_id, out_dir), Owner.of("report", store, model_id), default=out_dir is None)


def marker_of(folder: Path) -> tuple[Owner, set[str]] | None:
    """The owner recorded in `folder`'s marker and the files it wrote there; None when it has no marker (an
    unreadable one is none)."""
    try:
        saved = json.loads((folder / OUTPUT_MARKER).read_text(encoding="utf-8"))
        owner = Owner(str(saved["kind"]), str(saved["store"]), str(saved["series"]))
        return owner, {str(f) for f in saved["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def staging_folder(out: Path, owner: Owner) -> Path:
    """A new temp folder beside `out`, its marker written first (so that whatever a killed run leaves is known as
    `owner`'s), made by a plain mkdir so that the user's umask sets its mode as for any folder (mkdtemp's 0700 would
    lock a group or a web server out of the published report; reading the umask with os.umask would change it for
    every thread of the process meanwhile). Its name names this process (`atomic.temp_path`): the staging folders
    that killed writers left beside `out` are removed first."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep_dead_temps(out.parent)
    tmp = temp_path(out)
    tmp.mkdir()
    try:
        _write_marker(tmp, owner, [])
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def _write_marker(folder: Path, owner: Owner, files: list[str]) -> None:
    marker = asdict(owner) | {"files": sorted(files), "written_by": f"dormant-heads {__version__}"}
    (folder / OUTPUT_MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


def publish_folder(tmp: Path, out, owner: Owner, option: str = "--reports-dir", default: bool = False) -> Path:
    """Move the complete folder `tmp` into place at `out` (checked again here: `check_folder`), its marker listing
    what it holds. An empty folder is replaced by one rename, which fails, replacing nothing, if a file appeared in
    it meanwhile; this owner's folder is renamed away, then only the files of its manifest are removed from it
    (whatever else appeared since the check is kept, in a folder beside, and said on stderr). Returns the resolved
    path."""
    path = check_folder(out, owner, option, default)
    found = marker_of(path) if path.is_dir() else None
    _write_marker(tmp, owner, [f for f in _entries(tmp)[0] if f != OUTPUT_MARKER])
    if found is None:
        try:
            os.replace(tmp, path)  # onto nothing or an empty folder: refused by the kernel if it is no longer empty
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            check_folder(out, owner, option, default)  # names what appeared
            raise ConfigError(f"{option} {out} changed while it was written; run again") from None
        return path
    old = temp_path(path, "old")  # a kill before its removal leaves it to `sweep_dead_temps`
    os.replace(path, old)
    os.replace(tmp, path)
    _remove_listed(old, found[1], path)
    return path


def _remove_listed(old: Path, manifest: set[str], path: Path) -> None:
    """Remove from `old` (a replaced folder) the files its manifest lists and the folders they leave empty, never
    through a link; anything else in it was put there after the check: kept, in a visible folder beside."""
    for f in sorted(manifest | {OUTPUT_MARKER}):
        p = old / f
        if not p.is_symlink() and p.is_file() and all(not q.is_symlink() for q in p.parents if old in q.parents):
            p.unlink()
    for d in sorted({q for f in manifest for q in (old / f).parents if old in q.parents}, reverse=True):
        with contextlib.suppress(OSError):  # not empty, or not a folder: kept
            d.rmdir()
    try:
        old.rmdir()
    except OSError:
        kept = path.with_name(f"{path.name}.kept-{old.name.rsplit('-', 1)[1]}")
        os.replace(old, kept)
        print(f"note: files added to the folder while it was written are kept in {kept}", file=sys.stderr)


@contextlib.contextmanager
def staged(out, owner: Owner, option: str = "--reports-dir", default: bool = False) -> Iterator[Path]:
    """A staging folder for `out` (`staging_folder`), published when the block ends (`publish_folder`) and removed
    when it fails, so that a failed write leaves the old folder as it was. A write that finds no room (a full disk,
    a quota, a file size limit) or no permission is one line naming the folder and the fix."""
    tmp = None
    try:
        tmp = staging_folder(out, owner)
        yield tmp
        publish_folder(tmp, out, owner, option, default)
    except OSError as e:
        if e.errno not in _NO_ROOM | USER_ERRNOS - {errno.ENOTEMPTY, errno.EEXIST}:
            raise
        where = f"the default {option} {out}" if default else f"{option} {out}"
        fix = "free space on that disk" if e.errno in _NO_ROOM else "fix its permissions"
        kept = "its old content is intact" if Path(out).exists() else "nothing was written"
        raise ConfigError(
            f"cannot write {where}: {e.strerror or e}; {fix}, or name another {option} ({kept})"
        ) from None
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def stored_comparisons(store) -> list[dict]:
    """The comparison folders recorded in the store (`record_comparison`): per folder its resolved path
    (`folder`) and the series it compares (`models`); none for a missing or unreadable index. Takes no lock: the
    index is replaced whole."""
    try:
        entries = json.loads(comparisons_files(store)[0].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [
        e
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict)
        and isinstance(e.get("folder"), str)
        and isinstance(e.get("models"), list)
        and all(isinstance(m, str) for m in e["models"])
    ]


def record_comparison(store, folder, models: list[str]) -> Path:
    """Record the comparison folder `folder` (keyed by its resolved path: one entry per folder) and the series it
    compares in the store's index (never beside the folder: that may be the user's), replaced whole
    (`atomic_file`) under its writers' lock (`filelock`), so that two compare runs at once both land; the index's
    path. StoreError (one line) when the store takes no file."""
    from filelock import FileLock

    index, lock = comparisons_files(store_folder(store))
    refuse_published(store)  # a published series is read, never written
    key = str(Path(folder).resolve())
    with write_errors(lock.parent):
        lock.parent.mkdir(exist_ok=True)
        held = FileLock(lock)
        held.acquire()
    try:
        entries = [e for e in stored_comparisons(store) if e["folder"] != key]
        entries = sorted([*entries, {"folder": key, "models": list(models)}], key=lambda e: e["folder"])
        with atomic_file(index) as f:
            f.write((json.dumps(entries, indent=1) + "\n").encode())
    finally:
        held.release()
    return index


def check_file(out, option: str = "--out") -> Path:
    """`out` when it is new or a Parquet file this tool wrote (`OWNER_KEY`); else a one-line ConfigError."""
    path = Path(out)
    if path.is_dir():
        raise ConfigError(f"{option} {out} is a folder: name a .parquet file, e.g. {path / 'scores.parquet'}")
    if not path.parent.is_dir():
        raise ConfigError(f"{option} folder {str(path.parent)!r} does not exist; create it first")
    if path.exists() and not _written_by_us(path):
        raise ConfigError(
            f"{option} {out} exists and was not written by dormant-heads: name a new file (it is never replaced)"
        )
    return path


def _written_by_us(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_schema(path).metadata or {}
    except Exception:  # noqa: BLE001 - not Parquet, unreadable: not ours
        return False
    return OWNER_KEY in metadata
