"""The index of comparisons in a reports folder: how `dormant report` finds the comparisons of its series.

`dormant compare` writes its page into a folder of the reports folder (`<reports>/compare-A-vs-B/`) and records
itself in `<reports>/comparisons.json`: one entry per comparison folder, with the series it compares. A report
rendered into `<reports>/<series>/` reads that file and links to every comparison that includes its series and
still has its page. One small JSON file, replaced whole (temp file + rename) under a lock file (`filelock`, the
writers' only), so that two compare runs at once both land and a reader, who takes no lock, sees the old index or
the new one. stdlib only, and `filelock` when an entry is recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from dormant_tasks.atomic import temp_path

INDEX = "comparisons.json"
LOCK = ".comparisons.lock"


def read_index(folder: Path) -> list[dict]:
    """The entries of `folder`'s index whose page still exists (a missing or unreadable index: none)."""
    try:
        entries = json.loads((Path(folder) / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(entries, list):
        return []
    return [
        e
        for e in entries
        if isinstance(e, dict)
        and isinstance(e.get("folder"), str)
        and isinstance(e.get("models"), list)
        and (Path(folder) / e["folder"] / "index.html").is_file()
    ]


def record_comparison(out: Path, models: list[str]) -> Path:
    """Record the comparison published in `out` in its parent folder's index (one entry per folder); the path
    of the index."""
    folder = Path(out).parent
    with _locked(folder):
        entries = [e for e in read_index(folder) if e["folder"] != Path(out).name]
        entries.append({"folder": Path(out).name, "models": list(models)})
        entries.sort(key=lambda e: e["folder"])
        tmp = temp_path(folder / INDEX)  # a killed writer's is swept by the next page published here
        try:
            tmp.write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, folder / INDEX)
        finally:
            tmp.unlink(missing_ok=True)
    return folder / INDEX


def comparisons_of(model_id: str, report_dir: Path) -> list[dict]:
    """The comparisons recorded beside `report_dir` (the report folder of `model_id`) that include the series:
    per comparison its `title` ("A vs B vs C") and `href` (its index.html, relative to the report folder)."""
    folder = Path(report_dir).parent
    return [
        {
            "title": " vs ".join(e["models"]),
            "href": Path(os.path.relpath(folder / e["folder"] / "index.html", report_dir)).as_posix(),
        }
        for e in read_index(folder)
        if model_id in e["models"]
    ]


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    from filelock import FileLock

    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / LOCK):
        yield
