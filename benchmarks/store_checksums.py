"""Whole-file checksums: what `dormant status --verify` and the checked reads cost beside plain `dormant status`.

A synthetic series of N checkpoints x 1,024 heads (16 layers x 64) x 15 score functions is written through the
store's own write path (`commit_checkpoint`: head_scores files and the manifest, their checksums recorded), with
fixed taus and transitions derived by the real `rederive`. No model is loaded: each head's score is a seeded
random walk around tau, so heads cross it and the series has transitions. The CLI commands run in subprocesses
(wall time, Python start-up included), as a user runs them, each in turn for five rounds, the best of each
kept; `verify / plain` is their ratio, measured side by side at each size. "checked read" is one `read_table` of the series' transitions (its whole-file checksum
checked against the store's `_sums`) against the same read with the check skipped (best of five each).

Usage: PYTHONPATH=. .venv/bin/python benchmarks/store_checksums.py [--sizes 30,100,300] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

MODEL = "bench/checksums"
CAL, TAUS = "winogrande-dev-bench", "taus-bench"
N_LAYERS, N_HEADS, N_FNS = 16, 64, 15
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def fns() -> list[str]:
    from dormant_tasks.engine import ALL_IDS, DEFAULT_FN

    return [DEFAULT_FN, *[f for f in ALL_IDS if f != DEFAULT_FN]][:N_FNS]  # the function status counts


class Series:
    """Scores of checkpoint i: a seeded random walk per (function, layer, head) around tau 0.5."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.score = 0.5 + 0.2 * self.rng.standard_normal((N_FNS, N_LAYERS, N_HEADS))
        self.names = fns()
        grid = np.indices((N_FNS, N_LAYERS, N_HEADS)).reshape(3, -1)
        self.fn_col = pa.array([self.names[i] for i in grid[0]])
        self.layer_col = pa.array(grid[1].astype(np.int32))
        self.head_col = pa.array(grid[2].astype(np.int32))

    def checkpoint(self, store: Path, i: int) -> None:
        from dormant_tasks.store import commit_checkpoint, conform

        self.score = self.score + 0.02 * self.rng.standard_normal(self.score.shape)
        s = self.score.reshape(-1)
        n = s.size
        revision = f"stage1-step{10 * i}-tokens{40 * i}K"
        common = {"model_id": MODEL, "revision": revision, "stage": 1, "step": 10 * i, "tokens": 40_000 * i}
        rate = np.clip(1.0 - s, 0.0, 1.0)
        cols = {k: pa.array([v] * n) for k, v in common.items()}
        cols |= {
            "score_fn": self.fn_col,
            "layer": self.layer_col,
            "head_index": self.head_col,
            "score": pa.array(s),
            "score_std": pa.array(np.abs(self.rng.standard_normal(n)).astype(np.float32)),
            "tau": pa.array(np.full(n, 0.5)),
            "direction": pa.array(["<"] * n),
            "dormant_rate": pa.array(rate),
            "dormant": pa.array(rate >= 0.5),
            "calibration_id": pa.array([CAL] * n),
            "taus_id": pa.array([TAUS] * n),
        }
        heads = conform(pa.table(cols), "head_scores")
        row = common | {
            "commit": f"sha{i}",
            "n_layers": N_LAYERS,
            "n_heads": N_HEADS,
            "calibration_id": CAL,
            "n_inputs": 128,
            "dtype": "float32",
            "device": "cpu",
            "seconds": 1.0,
            "analyzed_at": T0 + timedelta(minutes=i),
            "code_version": "bench",
            "taus_id": TAUS,
            "scoring_version": "1",
        }
        commit_checkpoint(store, row, heads)


def write_taus(store: Path) -> None:
    from dormant_tasks.store import write_table

    rows = [
        {"model_id": MODEL, "revision": "", "stage": 0, "step": 0, "tokens": 0, "score_fn": fn, "tau": 0.5}
        | {"direction": "<", "source": "fixed", "calibration_id": CAL, "taus_id": TAUS}
        for fn in fns()
    ]
    write_table(store, "taus", rows, file_key="taus")


def cli(*args: str) -> tuple[float, int, str]:
    """Seconds, exit code and stderr of one `dormant` command in a subprocess."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, p.returncode, p.stderr


def side_by_side(store: Path, rounds: int = 5) -> dict[str, float]:
    """The best of `rounds` of each command, run in turn (plain, --verify, --check, plain, ...): a machine
    shared with other work slows all three alike."""
    commands = {
        "plain": ("status", "--store", str(store)),
        "verify": ("status", "--verify", "--store", str(store)),
        "check": ("store", "repair", "--check", "--store", str(store)),
    }
    best = dict.fromkeys(commands, float("inf"))
    for _ in range(rounds):
        for name, args in commands.items():
            seconds, rc, err = cli(*args)
            assert rc == 0, err
            best[name] = min(best[name], seconds)
    return best


def checked_read(store: Path) -> tuple[float, float]:
    """Seconds of the series' transitions read with its checksum checked, and with the check skipped."""
    from dormant_tasks.store import io, read_table

    def best(f) -> float:
        out = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            f()
            out = min(out, time.perf_counter() - t0)
        return out

    checked = best(lambda: read_table(store, "transitions", MODEL))
    saved = io.check_sums
    io.check_sums = lambda root, files: None  # the same read, its checksum unchecked
    try:
        unchecked = best(lambda: read_table(store, "transitions", MODEL))
    finally:
        io.check_sums = saved
    return checked, unchecked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="30,100,300")
    ap.add_argument("--keep", metavar="DIR", help="build the store here and keep it")
    args = ap.parse_args()
    from dormant_tasks.tracking import rederive

    sizes = sorted(int(x) for x in args.sizes.split(","))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-checksums-"))
    store = work / "store"
    series = Series()
    written = 0
    print(
        f"{'N':>5} {'store MB':>9} {'status s':>9} {'--verify s':>11} {'verify/plain':>13} {'--check s':>10} "
        f"{'checked read ms':>16} {'unchecked ms':>13} {'checked/unchecked':>18}"
    )
    try:
        for n in sizes:
            while written < n:
                series.checkpoint(store, written)
                written += 1
            if not (store / "taus").exists():
                write_taus(store)
            rederive(store, MODEL)
            mb = sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) / 1e6
            t = side_by_side(store)
            checked, unchecked = checked_read(store)
            print(
                f"{n:>5} {mb:>9.1f} {t['plain']:>9.2f} {t['verify']:>11.2f} {t['verify'] / t['plain']:>13.2f} "
                f"{t['check']:>10.2f} {1e3 * checked:>16.1f} {1e3 * unchecked:>13.1f} {checked / unchecked:>18.2f}",
                flush=True,
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
