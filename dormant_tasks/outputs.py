"""What the tool writes outside its store: report and findings folders, and `score --out` files.

One rule for all of them: nothing the tool did not write is ever replaced. A folder is written only if it is
new, empty, or marked as this tool's output (`OUTPUT_MARKER`, written into every folder it publishes: kind, store,
series and the files written) of the same kind, store and series, holding no file the marker does not list.
A report belongs to the store it came from: another store's run is refused, never written over it. The store, a folder inside it or one that holds it, and the working folder or one
above it are never output folders. A file (`score --out`) is written only if it is new or one this tool wrote
(`OWNER_KEY` in its Parquet metadata). Everything else is one line naming the option and the fix.

Stdlib only (pyarrow only for an existing `--out` file), so the CLI checks before any work.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from dormant_tasks.atomic import sweep_dead_temps, temp_path
from dormant_tasks.errors import ConfigError
from dormant_tasks.paths import default_reports_dir
from dormant_tasks.version import __version__

OUTPUT_MARKER = ".dormant-report.json"  # in every folder the tool publishes: what it is, from which store and series
OWNER_KEY = b"dormant_heads"  # the Parquet schema metadata key of a file the tool wrote
# A folder rendered before the marker existed holds only these (and figures/ only PNG and SVG): adopted once.
_UNMARKED_OUTPUT = {"index.html", "summary.md", "inputs.json", "findings.md", "figures"}


@dataclass(frozen=True)
class Owner:
    """Whose output a folder is: `kind` ("report", "findings"), the store's resolved path, the series."""

    kind: str
    store: str
    series: str

    @classmethod
    def of(cls, kind: str, store, series: str) -> Owner:
        return cls(kind, str(Path(store).resolve()), series)

    def describe(self) -> str:
        return f"the {self.kind} of {self.series} from store {self.store}"


def check_folder(out, owner: Owner, option: str = "--reports-dir") -> Path:
    """The resolved folder `out`, when `owner`'s output may be published there; else a one-line ConfigError."""
    given = str(out)
    path = Path(out).resolve()
    store = Path(owner.store)
    where = f"{option} {given}"
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
        if not _unmarked_output(path):
            _refuse_foreign(where, sorted(p.name for p in path.iterdir())[0])
        return path
    if found[0] != owner:
        raise ConfigError(
            f"{where} holds {found[0].describe()}, not {owner.describe()}: name another {option} "
            f"(an output belongs to its store and series), or delete {given} first"
        )
    foreign = sorted(set(_files(path)) - found[1] - {OUTPUT_MARKER})
    if foreign:  # a marked folder the user added to: replacing it would lose what they added
        _refuse_foreign(where, foreign[0])
    return path


def _refuse_foreign(where: str, example: str) -> None:
    raise ConfigError(
        f"{where} holds files dormant-heads did not write (e.g. {example}): name a new or empty folder; "
        "nothing there is replaced"
    )


def _files(folder: Path) -> list[str]:
    """Every file and link under `folder`, as relative POSIX paths (folders themselves aside)."""
    return [p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir() or p.is_symlink()]


def report_folder(model_id: str, out_dir=None) -> Path:
    """Where a series' report goes: `out_dir`, else <$DORMANT_REPORTS or ./reports>/<series slug>/."""
    from dormant_tasks.names import series_slug

    return Path(out_dir) if out_dir is not None else default_reports_dir() / series_slug(model_id)


def check_report_folder(store, model_id: str, out_dir=None) -> Path:
    """`check_folder` of a series' report folder (`report_folder`): what `track`, `demo` and `report` ask first."""
    return check_folder(report_folder(model_id, out_dir), Owner.of("report", store, model_id))


def marker_of(folder: Path) -> tuple[Owner, set[str]] | None:
    """The owner recorded in `folder`'s marker and the files it wrote there; None when it has no marker (an
    unreadable one is none)."""
    try:
        saved = json.loads((folder / OUTPUT_MARKER).read_text(encoding="utf-8"))
        owner = Owner(str(saved["kind"]), str(saved["store"]), str(saved["series"]))
        return owner, {str(f) for f in saved["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _unmarked_output(folder: Path) -> bool:
    """Empty, or what a report or findings rendered before the marker existed holds, nothing else."""
    entries = list(folder.iterdir())
    if any(p.name not in _UNMARKED_OUTPUT for p in entries):
        return False
    figures = folder / "figures"
    return not figures.exists() or (
        figures.is_dir() and all(p.is_file() and p.suffix in (".png", ".svg") for p in figures.iterdir())
    )


def staging_folder(out: Path) -> Path:
    """A new temp folder beside `out`, made by a plain mkdir so that the user's umask sets its mode as for any
    folder (mkdtemp's 0700 would lock a group or a web server out of the published report; reading the umask
    with os.umask would change it for every thread of the process meanwhile). Its name names this process
    (`atomic.temp_path`): the staging folders that killed writers left beside `out` are removed first."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep_dead_temps(out.parent)
    tmp = temp_path(out)
    tmp.mkdir()
    return tmp


def publish_folder(tmp: Path, out, owner: Owner, option: str = "--reports-dir") -> Path:
    """Move the complete folder `tmp` into place at `out` (checked again here: `check_folder`), with its marker.
    A folder it replaces (empty, or this owner's) is renamed away first, then deleted. Returns the resolved path."""
    path = check_folder(out, owner, option)
    marker = asdict(owner) | {"files": sorted(_files(tmp)), "written_by": f"dormant-heads {__version__}"}
    (tmp / OUTPUT_MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    old = None
    if path.exists():
        old = temp_path(path, "old")  # a kill before its deletion leaves it to `sweep_dead_temps`
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path


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
