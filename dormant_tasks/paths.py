"""Where things are: the package's bundled data, and the default store, reports and series folders.

Bundled inputs ship inside the package (`dormant_tasks/data/`, read through `importlib.resources`), so an
installed wheel finds them from any folder. Outputs default to folders under the current working directory
(`./data/store`, `./reports`, `./data/series`), never inside the installed package; `$DORMANT_STORE` and
`$DORMANT_REPORTS` move the first two. Stdlib only: the CLI builds its `--help` from these without loading
pyarrow or torch.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def bundled_file(name: str) -> Path:
    """A file of the package's bundled data (`dormant_tasks/data/NAME`) as a path on disk: pip installs a wheel
    as plain files, so `importlib.resources` gives a real file whose path callers can open, hash and name."""
    return Path(str(resources.files("dormant_tasks") / "data" / name))


def default_store() -> Path:
    """$DORMANT_STORE, else `data/store`: relative, so it is resolved against the working directory of each use."""
    return Path(os.environ.get("DORMANT_STORE", "data/store"))


def default_reports_dir() -> Path:
    """$DORMANT_REPORTS, else `reports` under the working directory; a report goes to <this>/<series slug>/."""
    return Path(os.environ.get("DORMANT_REPORTS", "reports"))


def default_series_dir() -> Path:
    """`data/series` under the working directory: where `dormant demo` pretrains its tiny series."""
    return Path("data/series")


def absolute_path(path: str | None) -> str | None:
    """Paths are stored absolute, so a saved request means the same thing from any working directory."""
    return None if path is None else str(Path(path).expanduser().resolve())
