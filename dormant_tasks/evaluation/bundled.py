"""The evaluation datasets bundled with the package, so that lm-eval tasks run with the Hub out of reach: one Parquet
file per split at `data/tasks/<dataset_path with "/" as "--">[/<dataset_name>]/<split>.parquet`, listed off the
folder (`data/derive_tasks.py` writes them); a dataset in `SUBSETS` holds only some rows. Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dormant_tasks.paths import bundled_file

TASKS_DIR = bundled_file("tasks")
SUBSETS: frozenset[tuple[str, str | None]] = frozenset()  # (path, name) bundled as a subset; none at present


@dataclass(frozen=True)
class BundledDataset:
    path: str  # lm-eval dataset_path, e.g. "cais/mmlu"
    name: str | None  # lm-eval dataset_name, e.g. "anatomy"
    splits: dict[str, Path]  # split -> parquet file
    full: bool  # every row of each split (False: a subset, see data/README.md)


def _dataset(path: str, name: str | None, folder: Path) -> BundledDataset | None:
    """The dataset whose split files lie directly in `folder`; None when there are none."""
    splits = {f.stem: f for f in sorted(folder.glob("*.parquet"))}
    return BundledDataset(path, name, splits, (path, name) not in SUBSETS) if splits else None


def _folders(parent: Path) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []


@cache
def bundled_datasets() -> tuple[BundledDataset, ...]:
    """Every bundled dataset, in the sorted order of the folders (a name of None before the named ones)."""
    found = []
    for top in _folders(TASKS_DIR):
        path = top.name.replace("--", "/")
        candidates = [_dataset(path, None, top)] + [_dataset(path, sub.name, sub) for sub in _folders(top)]
        found += [d for d in candidates if d is not None]
    return tuple(found)


def bundled_dataset(path: str, name: str | None) -> BundledDataset | None:
    """The bundled copy of lm-eval's (dataset_path, dataset_name), or None when it is not bundled."""
    return next((d for d in bundled_datasets() if d.path == path and d.name == name), None)
