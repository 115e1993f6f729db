"""Reading `--texts FILE` with a limit versus the whole file, side by side (compare the ratios).

Measures: seconds and peak Python memory (tracemalloc) of `load_calibration(FILE, limit)` (the default, 128
texts, and `--limit 8`) versus `limit=None` (every line, what `--texts` without `--limit` read before the
default limit), on a file of N lines (default 1,000,000, ~50 MB), and of a file holding one line of M MB
(default 100) read with the default limit.

Targets: the limited reads cost well under 1% of the whole file's time and memory, whatever N is (they read
the first limit + 1 texts only); the 100 MB line peaks near MAX_TEXT_CHARS characters (it is cut while read).

Usage: .venv/bin/python benchmarks/texts_read.py [--lines 1000000] [--line-mb 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

from dormant_tasks.tracking import load_calibration


def measure(path: Path, limit: int | None) -> tuple[float, int, int]:
    """(seconds, peak bytes, texts read)."""
    tracemalloc.start()
    t0 = time.perf_counter()
    calibration = load_calibration(path, limit) if limit is not None else _whole(path)
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak, len(calibration.texts)


def _whole(path: Path):
    from dormant_tasks.tracking import texts_calibration

    return texts_calibration(path, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--line-mb", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="texts-read-") as tmp:
        many = Path(tmp) / "many.txt"
        with open(many, "w", encoding="utf-8") as f:
            f.writelines(f"calibration text number {i} with a few more words\n" for i in range(args.lines))
        print(f"{many.name}: {args.lines:,} lines, {many.stat().st_size / 1e6:.1f} MB")
        whole = measure(many, None)
        print(f"{'read':<18} {'seconds':>8} {'peak MB':>8} {'texts':>9} {'time ratio':>11} {'memory ratio':>13}")
        for name, limit in (("whole file", None), ("default (128)", 128), ("--limit 8", 8)):
            s, peak, n = whole if limit is None else measure(many, limit)
            print(f"{name:<18} {s:>8.3f} {peak / 1e6:>8.2f} {n:>9,} {s / whole[0]:>11.4f} {peak / whole[1]:>13.5f}")
        del many
        long = Path(tmp) / "long.txt"
        with open(long, "w", encoding="utf-8") as f:
            f.write("a short first text\n")
            chunk = "x" * 1_000_000
            for _ in range(args.line_mb):
                f.write(chunk)
            f.write("\nthe text after it\n")
        s, peak, n = measure(long, 128)
        print(f"one {args.line_mb} MB line: {s:.3f} s, peak {peak / 1e6:.2f} MB, {n} texts (the long one cut)")


if __name__ == "__main__":
    main()
