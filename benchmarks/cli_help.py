"""Time `dormant --help` and every `dormant <cmd> --help`, each as a fresh subprocess (`python -m flows.cli`).

Target: under 1 s each (building the parser imports no torch, transformers, pyarrow, prefect, numpy or
matplotlib; `tests/library/cli/test_cli_help.py` checks the imports). Time: median wall time of REPEATS runs.

Run: .venv/bin/python benchmarks/cli_help.py   (other jobs on the machine add noise: run it twice)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from flows.cli import COMMANDS

REPO = Path(__file__).resolve().parent.parent
TARGET_S = 1.0
REPEATS = 3


def help_seconds(argv: list[str]) -> float:
    """Median wall time of `python -m flows.cli *argv --help`."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "flows.cli", *argv, "--help"], cwd=REPO, check=True, stdout=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    print(f"{'command':<30} {'median s':>9} {'target s':>9} {'ratio':>6}")
    for argv in [[]] + [[name.replace("_", "-")] for name in COMMANDS]:
        seconds = help_seconds(argv)
        print(
            f"{' '.join(['dormant', *argv, '--help']):<30} {seconds:>9.2f} {TARGET_S:>9.2f} {seconds / TARGET_S:>6.2f}"
        )


if __name__ == "__main__":
    main()
