"""Time `dormant leaderboard` on a big store: 50 models x 16 functions x 5 tasks x 7 quantiles of evaluations.

Target: under 5 s end to end (a fresh `dormant leaderboard` process: Python start, imports, reading the
store, the table). The store is generated here through `dormant_tasks.store.io.write_table`, one file per model
and task as `dormant evaluate` writes them (250 files, 28,000 rows), with random monotone sweeps; it is not
timed. Timed, each the median of REPEATS runs:
  cli     = `dormant leaderboard --store S > /dev/null` (markdown), as a subprocess;
  figure  = the same with `--figure agreement.png` (the 50 x 50 agreement of the functions' AUCs);
  library = `load_leaderboard` + `format_leaderboard_table` in this process (imports already done).

    .venv/bin/python benchmarks/leaderboard_table.py [--models 50] [--tasks 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from dormant_tasks.engine import ALL_IDS
from dormant_tasks.evaluation import DEFAULT_QUANTILES, format_leaderboard_table, load_leaderboard
from dormant_tasks.store import write_table

TARGET_S = 5.0
REPEATS = 3
DORMANT = Path(sys.executable).with_name("dormant")
TASKS = ("winogrande", "mmlu", "hellaswag", "piqa", "arc_challenge", "gsm8k", "arc_easy", "boolq")


def build_store(root: Path, n_models: int, n_tasks: int, seed: int = 0) -> int:
    """Random sweeps: per (model, task, function) a measured % zeroed that grows with the quantile and an
    accuracy that falls faster for some functions than for others. Returns the number of rows."""
    rng = np.random.default_rng(seed)
    fns, qs = list(ALL_IDS), np.asarray(DEFAULT_QUANTILES)
    n = len(fns) * len(qs)
    t0 = datetime(2025, 6, 1, tzinfo=UTC)
    rows = 0
    for m in range(n_models):
        model = f"bench/model-{m:02d}"
        for k, task in enumerate(TASKS[:n_tasks]):
            base = rng.uniform(0.4, 0.8)
            frac = qs[None, :] * rng.uniform(0.8, 1.1, (len(fns), 1))  # [fn, q]
            slope = rng.uniform(0.02, 0.4, (len(fns), 1))  # [fn, 1] accuracy lost per fraction zeroed
            acc = base - slope * frac + rng.normal(0, 0.002, frac.shape)  # [fn, q]
            request_id = f"req{m:02d}{k}"
            table = pa.table(
                {
                    "model_id": [model] * n,
                    "revision": ["main"] * n,
                    "stage": np.full(n, -1, np.int32),
                    "step": np.full(n, -1),
                    "tokens": np.full(n, -1),
                    "task": [task] * n,
                    "shots": np.full(n, 5, np.int32),
                    "mode": ["dynamic"] * n,
                    "score_fn": np.repeat(np.array(fns, dtype=object), len(qs)),
                    "quantile": np.tile(qs, len(fns)),
                    "tau": rng.uniform(0, 1, n),
                    "frac_zeroed": frac.ravel(),
                    "accuracy": acc.ravel(),
                    "n_items": np.full(n, 1000, np.int32),
                    "base_accuracy": np.full(n, base),
                    "code_version": ["bench"] * n,
                    "request_id": [request_id] * n,
                    "metric": ["acc,none"] * n,
                    "chat_template": np.zeros(n, bool),
                    "bos": ["paper"] * n,
                    "fewshot_split": ["train"] * n,
                    "data_source": ["bundled"] * n,
                    "lm_eval_version": ["0.4.9"] * n,
                    "chance": np.full(n, 0.25),
                    "evaluated_at": pa.array([t0 + timedelta(minutes=m * n_tasks + k)] * n, pa.timestamp("us", "UTC")),
                }
            )
            write_table(root, "evaluations", table, file_key=f"main-dynamic-{request_id}")
            rows += n
    return rows


def median_seconds(run, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=5, help=f"at most {len(TASKS)}")
    parser.add_argument("--keep", type=Path, default=None, help="also keep the table and figure in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dormant-leaderboard-bench-") as tmp:
        store = Path(tmp) / "store"
        started = time.perf_counter()
        n_rows = build_store(store, args.models, args.tasks)
        print(
            f"store: {args.models} models x {len(ALL_IDS)} functions x {args.tasks} tasks x "
            f"{len(DEFAULT_QUANTILES)} quantiles = {n_rows:,} rows in {args.models * args.tasks} files, built in "
            f"{time.perf_counter() - started:.1f} s (not timed below)"
        )
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)

        def cli(*extra):
            with open(out / "leaderboard.md", "w") as f:
                proc = subprocess.run(
                    [str(DORMANT), "leaderboard", "--store", str(store), *extra],
                    stdout=f,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            if proc.returncode:
                sys.exit(f"dormant leaderboard failed: {proc.stderr}")

        board = None

        def library():
            nonlocal board
            board = load_leaderboard(store)
            format_leaderboard_table(board.rows, "markdown")

        results = [
            ("dormant leaderboard", median_seconds(cli)),
            ("dormant leaderboard --figure", median_seconds(lambda: cli("--figure", str(out / "agreement.png")))),
            ("load_leaderboard + format", median_seconds(library)),
        ]
        print(f"board: {len(board.rows):,} rows ({len(board.revisions)} models), notes: {len(board.notes)}")
        print(f"{'what':<32} {'median s':>9} {'target s':>9} {'ratio':>6}")
        for what, seconds in results:
            print(f"{what:<32} {seconds:>9.2f} {TARGET_S:>9.2f} {seconds / TARGET_S:>6.2f}")
        verdict = "met" if results[0][1] < TARGET_S else "MISSED"
        print(f"end to end: {results[0][1]:.2f} s, target {TARGET_S:.0f} s: {verdict}")


if __name__ == "__main__":
    main()
