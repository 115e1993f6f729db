"""Time `render_report` on a big series: 200 checkpoints x 1,024 heads (32 layers x 32) x 15 score functions.

Target: under 60 s on the development machine. The store is generated here (real Parquet through
`dormant_tasks.store.io`, transitions by the real `derive_transitions`) with random-walk dormancy: each
head's log-score walks with noise and a per-head drift, so heads fall dormant and wake at various times,
and the 15 functions share the walk plus their own noise (they agree partly, as real functions do).

    .venv/bin/python benchmarks/report_render.py [--checkpoints 200] [--layers 32] [--heads 32] [--keep DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from dormant_tasks.engine import DETERMINISTIC_IDS, get_score_function
from dormant_tasks.reporting import render_report
from dormant_tasks.store import commit_checkpoint, derived_file_key, read_table, store_folder, write_table
from dormant_tasks.tracking import derive_transitions, head_histories, mark_blips

TARGET_S = 60.0
MODEL = "bench/random-walk-series"
TOKENS_PER_STEP = 2_100_000  # OLMo-2 1B
CALIBRATION_ID, TAUS_ID = "winogrande-dev-128-bench", "taus-bench"


def random_walk_scores(rng, n_ckpt: int, n_heads_total: int, n_fns: int) -> np.ndarray:
    """float64 [fn, head, checkpoint] positive scores around 1 (layer-normalised units)."""
    drift = np.where(rng.random(n_heads_total) < 0.3, -0.02, 0.002)  # [head] 30% of heads drift towards dormancy
    shared = np.cumsum(drift[:, None] + rng.normal(0, 0.06, (n_heads_total, n_ckpt)), axis=1)  # [head, checkpoint]
    own = np.cumsum(rng.normal(0, 0.03, (n_fns, n_heads_total, n_ckpt)), axis=2)  # [fn, head, checkpoint]
    return np.exp(shared[None] + own + rng.normal(0, 0.05, (n_fns, n_heads_total, 1)))


def fixed_taus(model_id: str, fns, taus, directions, calibration_id: str, taus_id: str) -> list[dict]:
    """The `taus` rows of a synthetic series: one fixed tau per function (what marks a series as tracked)."""
    return [
        dict(
            model_id=model_id,
            revision="main",
            stage=-1,
            step=-1,
            tokens=-1,
            score_fn=fn,
            tau=float(tau),
            direction=d,
            source="fixed",
            calibration_id=calibration_id,
            taus_id=taus_id,
        )
        for fn, tau, d in zip(fns, taus, directions)
    ]


def build_store(root: Path, n_ckpt: int, n_layers: int, n_heads: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    fns = DETERMINISTIC_IDS
    H = n_layers * n_heads
    scores = random_walk_scores(rng, n_ckpt, H, len(fns))  # [fn, head, checkpoint]
    directions = [get_score_function(f).direction for f in fns]
    scores[[d == ">" for d in directions]] = (
        1.0 / scores[[d == ">" for d in directions]]
    )  # ">" functions: high = inactive
    taus = np.array([2.0 if d == ">" else 0.5 for d in directions])  # [fn]
    dormant = np.where(
        np.array(directions)[:, None, None] == ">", scores > taus[:, None, None], scores < taus[:, None, None]
    )  # [fn, head, checkpoint]
    store_folder(root, create=True)
    write_table(  # the series' taus: what marks it as tracked
        root, "taus", fixed_taus(MODEL, fns, taus, directions, CALIBRATION_ID, TAUS_ID), file_key="taus"
    )
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    steps = np.concatenate([[0], np.linspace(10_000, 1_900_000, n_ckpt - 1).astype(np.int64)])
    fn_col = np.repeat(np.array(fns, dtype=object), H)  # [fn * head]
    layer_col = np.tile(np.repeat(np.arange(n_layers, dtype=np.int32), n_heads), len(fns))
    head_col = np.tile(np.tile(np.arange(n_heads, dtype=np.int32), n_layers), len(fns))
    for c, step in enumerate(steps):
        revision, tokens = f"stage1-step{step}-tokens{step * TOKENS_PER_STEP // 10**9}B", int(step * TOKENS_PER_STEP)
        n = len(fn_col)
        common = {
            "model_id": [MODEL] * n,
            "revision": [revision] * n,
            "stage": np.full(n, 1, np.int32),
            "step": np.full(n, step),
            "tokens": np.full(n, tokens),
        }
        head_scores = pa.table(
            common
            | {
                "score_fn": fn_col,
                "layer": layer_col,
                "head_index": head_col,
                "score": scores[:, :, c].ravel(),
                "score_std": np.zeros(n),
                "tau": np.repeat(taus, H),
                "direction": np.repeat(np.array(directions, dtype=object), H),
                "dormant_rate": dormant[:, :, c].ravel().astype(float),
                "dormant": dormant[:, :, c].ravel(),
                "calibration_id": [CALIBRATION_ID] * n,
                "taus_id": [TAUS_ID] * n,
            }
        )
        row = {
            "model_id": MODEL,
            "revision": revision,
            "stage": 1,
            "step": int(step),
            "tokens": tokens,
            "commit": f"sha{c}",
            "n_layers": n_layers,
            "n_heads": n_heads,
            "calibration_id": CALIBRATION_ID,
            "n_inputs": 128,
            "dtype": "float32",
            "device": "cpu",
            "seconds": 10.0,
            "analyzed_at": t0 + timedelta(hours=c),
            "code_version": "bench",
            "taus_id": TAUS_ID,
            "scoring_version": "1",
            "file_key": revision,
        }
        commit_checkpoint(root, row, head_scores)  # the result's file, then its manifest row
    heads, ckpts = read_table(root, "head_scores", MODEL), read_table(root, "checkpoints", MODEL)
    transitions = mark_blips(derive_transitions(heads, ckpts))
    for table, t in (("transitions", transitions), ("head_histories", head_histories(heads, ckpts))):
        write_table(root, table, t, file_key=derived_file_key(table, TAUS_ID, CALIBRATION_ID), model_id=MODEL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=200)
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--keep", type=Path, default=None, help="also keep the rendered report in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dormant-report-bench-") as tmp:
        store = Path(tmp) / "store"
        t = time.perf_counter()
        build_store(store, args.checkpoints, args.layers, args.heads)
        print(
            f"store: {args.checkpoints} checkpoints x {args.layers * args.heads} heads x {len(DETERMINISTIC_IDS)} "
            f"functions built in {time.perf_counter() - t:.1f} s (not timed below)"
        )
        t, cpu = time.perf_counter(), time.process_time()
        result = render_report(store, MODEL, out_dir=args.keep or Path(tmp) / "report")
        seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
        # CPU time too: on a shared machine the wall time also counts other processes' turns.
        print(
            f"render_report: {seconds:.1f} s wall, {cpu:.1f} s CPU, {len(result.figures)} figures (PNG + SVG) | "
            f"target {TARGET_S:.0f} s | ratio wall/target {seconds / TARGET_S:.2f}, CPU/target {cpu / TARGET_S:.2f} "
            f"({'met' if seconds < TARGET_S else 'MISSED'} on wall time)"
        )


if __name__ == "__main__":
    main()
