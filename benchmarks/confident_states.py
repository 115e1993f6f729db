"""What deciding confident transitions over the whole series costs when one checkpoint is appended.

Confident states need every checkpoint's dormant rates (docs/SCORES.md §5, "Confidence"), so `derive_set`
reads six columns of the whole series' head_scores (`series_rates`) and runs `confirm_transitions` on
every append, beside the pair-by-pair derivation of the new mask changes, which reads two checkpoints. This
prints, side by side in one run and at each series length: the pair's derivation, the light read of the rates,
the confirmation, and their ratio, so that how each grows with the series is visible (the read and the
confirmation grow linearly in checkpoints x heads x functions; the pair's derivation stays flat).

The store is `report_render.build_store`'s synthetic series (random-walk dormancy, real Parquet): N checkpoints x
32 x 32 heads x 15 functions, 128 inputs each.

    .venv/bin/python benchmarks/confident_states.py [--sizes 100,300] [--layers 32] [--heads 32]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).parent))

from report_render import MODEL, build_store  # noqa: E402

from dormant_tasks.tracking import SeriesView, confirm_transitions, derive_transitions  # noqa: E402
from dormant_tasks.tracking.derive import series_rates  # noqa: E402


def measure(root: Path) -> dict[str, float]:
    view = SeriesView.open(root, MODEL)
    ckpts = view.checkpoints_table()
    out = {}
    t0 = time.perf_counter()
    two = view.revisions[-2:]
    sub = ckpts.filter(
        pc.is_in(ckpts.column("revision"), value_set=ckpts.column("revision").take([len(ckpts) - 2, len(ckpts) - 1]))
    )
    derive_transitions(view.head_scores(revisions=two), sub)
    out["pair"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    matrices = series_rates(view)
    out["read rates"] = time.perf_counter() - t0
    trans = view.transitions()
    t0 = time.perf_counter()
    confirm_transitions(trans, matrices)
    out["confirm"] = time.perf_counter() - t0
    out["transitions"] = trans.num_rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,300")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--heads", type=int, default=32)
    args = parser.parse_args()
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "store"
            build_store(root, n, args.layers, args.heads)
            m = measure(root)
        rows.append((n, m))
        print(
            f"{n:>5} checkpoints: pair {m['pair']:.2f} s, read rates {m['read rates']:.2f} s, confirm "
            f"{m['confirm']:.2f} s ({int(m['transitions']):,} mask changes); whole-series part / pair = "
            f"{(m['read rates'] + m['confirm']) / m['pair']:.1f}x",
            flush=True,
        )
    if len(rows) > 1:
        (a, x), (b, y) = rows[0], rows[-1]
        grow = ((y["read rates"] + y["confirm"]) / (x["read rates"] + x["confirm"])) / (b / a)
        print(f"growth of the whole-series part from {a} to {b} checkpoints, per checkpoint: {grow:.2f}x (1.0: linear)")


if __name__ == "__main__":
    main()
