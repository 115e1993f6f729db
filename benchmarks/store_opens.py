"""Count how often one `render_report` and one `dormant status` open the store: the checks of the store folder
(`store_folder`, `check_store`, `check_store_path`), the series opens (`SeriesView.open`), the manifest reads and
the reads of each table. Counts, not times: every call is seen by a profile hook (`sys.setprofile`).

The store is `report_render.build_store`'s synthetic series (one calibration set), small by default.

    .venv/bin/python benchmarks/store_opens.py [--checkpoints 12] [--layers 2] [--heads 4]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import threading
from argparse import Namespace
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # report_render, beside this script

from report_render import MODEL, build_store  # noqa: E402

from dormant_tasks.reporting import render_report  # noqa: E402
from dormant_tasks.store import io as store_io  # noqa: E402
from dormant_tasks.store import layout  # noqa: E402
from dormant_tasks.tracking import SeriesView  # noqa: E402
from flows.cli import status  # noqa: E402

WATCHED = {
    layout.store_folder.__code__: "store_folder (a store check)",
    layout.check_store.__code__: "check_store (a store check)",
    layout.check_store_path.__code__: "check_store_path (a store check)",
    SeriesView.open.__func__.__code__: "SeriesView.open (a series open)",
    store_io.read_manifest.__code__: "read_manifest",
}
READ_TABLE = store_io.read_table.__code__
OPENED = getattr(layout, "StoreFolder", ())  # an opened store is not checked again (absent before it existed)


@contextlib.contextmanager
def counting(where: bool = False):
    counts: Counter[str] = Counter()

    def hook(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code in WATCHED:
            key = WATCHED[code]
            if code is layout.store_folder.__code__ and isinstance(frame.f_locals["path"], OPENED):
                key = "store_folder of an opened StoreFolder (no check)"
        elif code is READ_TABLE:
            key = f"read_table {frame.f_locals['table']}"
        else:
            return
        caller = frame.f_back.f_code if frame.f_back else None
        counts[f"{key} <- {caller.co_filename.split('/')[-1]}:{caller.co_name}" if where and caller else key] += 1

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        yield counts
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def show(what: str, counts: Counter[str]) -> None:
    checks = sum(n for k, n in counts.items() if "(a store check)" in k)
    reads = sum(n for k, n in counts.items() if k.startswith("read_table"))
    opens = sum(n for k, n in counts.items() if k.startswith("SeriesView.open"))
    print(f"{what}: {checks} store checks, {opens} series opens, {reads} table reads")
    for key, n in sorted(counts.items()):
        print(f"  {n:4d}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=12)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--where", action="store_true", help="count by calling function too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dormant-store-opens-") as tmp:
        store = Path(tmp) / "store"
        build_store(store, args.checkpoints, args.layers, args.heads)
        print(f"store: {args.checkpoints} checkpoints x {args.layers * args.heads} heads, one calibration set")
        with counting(args.where) as counts:
            render_report(store, MODEL, out_dir=Path(tmp) / "report")
        show("render_report", counts)
        with counting(args.where) as counts, contextlib.redirect_stdout(io.StringIO()):
            code = status.run(Namespace(store=str(store), verify=False))
        show(f"dormant status (exit {code})", counts)


if __name__ == "__main__":
    main()
