"""How `dormant report` finds the comparisons of its series.

`dormant compare` publishes its page into its own folder (`<reports>/compare-A-vs-B/` or `--reports-dir`) and
records that folder, by its resolved path, in the store it read (`outputs.record_comparison`: the store's
`comparisons.json`, never a file beside the folder, which may be the user's). A report links to every recorded
comparison that includes its series and still has its page, by a link relative to the report's folder. An index
that an older dormant-heads left in the reports folder (`<reports>/comparisons.json`) is not read: a compare run
again records its folder in the store.
"""

from __future__ import annotations

import os
from pathlib import Path

from dormant_tasks.outputs import stored_comparisons


def comparisons_of(store, model_id: str, report_dir: Path) -> list[dict]:
    """The comparisons made from `store` that include `model_id` and whose page still exists: per comparison its
    `title` ("A vs B vs C") and `href` (its index.html, relative to `report_dir`, the report's folder)."""
    report_dir = Path(report_dir).resolve()
    return [
        {
            "title": " vs ".join(e["models"]),
            "href": Path(os.path.relpath(Path(e["folder"]) / "index.html", report_dir)).as_posix(),
        }
        for e in stored_comparisons(store)
        if model_id in e["models"] and (Path(e["folder"]) / "index.html").is_file()
    ]
