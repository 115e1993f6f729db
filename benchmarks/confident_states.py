"""Appending one checkpoint to a long series, and deciding its confident states, side by side per series length.

An append (`write_checkpoint`'s commit + `derive_series`) derives the new pair's mask changes and leaves the
confident-state decision pending (docs/DATA_CONTRACT.md, "Derived tables"); the decision is taken when the
transitions are read (`SeriesView.transitions`), once per read, over the whole series. This prints, at each
series length N, in one run:

- `append`: committing checkpoint N + 1 (its head_scores file and manifest row) and `derive_series`, over
  `--repeats` appends (each one more checkpoint; default PARTS_MAX + 1, one whole cycle of the transitions' parts):
  the median (an append that writes its rows as a part), the fold (the append that finds PARTS_MAX parts and
  writes the transitions whole) and the mean (what an append costs over a cycle); target: append at 1,000 <= 1.5 x
  append at 100, for the median and the mean;
- `decision`: what the first read of the transitions after that append pays (`SeriesView.transitions`): every
  checkpoint's rates read once (`series_rates`), then `decide_states` per function, timed on `--decide-fns` of
  the functions and scaled to all of them (each costs about the same; the line says so), at sizes up to
  `--decide-max`;
- the transitions' rows, and each figure's growth against the smallest N.

The store is synthetic (real Parquet through `dormant_tasks.store`): N checkpoints of LAYERS x HEADS heads x 15
functions with 128 calibration inputs each (per-input indicators stored, so the decision is `decide_states`), each
head's dormant rate a random walk around one half (some heads cross it now and then). It grows in place, 100 ->
300 -> ...; the checkpoints are committed one by one as a track run commits them, but the transitions of the
growth are derived in chunks (`mask_changes` of 64 checkpoints at a time, the library's own rows, ordered and
marked as `derive_series` orders and marks them), since a whole derivation of 3,000 checkpoints would hold every
head_scores row at once. At the smallest size the chunked files are checked against `derive_series`' own.

    PYTHONPATH=. .venv/bin/python benchmarks/confident_states.py [--sizes 100,300,1000,3000] [--heads 32x32]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.engine import DETERMINISTIC_IDS, SCORING_VERSION
from dormant_tasks.statistics.confidence import pack_inputs
from dormant_tasks.store import commit_checkpoint, derived_file_key, write_table
from dormant_tasks.tracking import SeriesView, TrackRequest, derive_series, mark_blips
from dormant_tasks.tracking.decision import derived_revisions, is_pending, series_rates
from dormant_tasks.tracking.derive import DERIVED_BY_KEY, series_pairs
from dormant_tasks.tracking.transition_files import (
    DECISION_KEY,
    PAIRS_KEY,
    PARTS_MAX,
    PENDING,
    in_series_order,
    transitions_metadata,
    write_whole,
)
from dormant_tasks.tracking.transitions import (
    FDR_KEY,
    apply_decisions,
    confirm_transitions,
    fdr_record,
    histories_of,
    mask_changes,
    states_from_transitions,
)
from dormant_tasks.version import __version__

sys.path.insert(0, str(Path(__file__).parent))

from report_render import fixed_taus  # noqa: E402

MODEL = "bench/append-series"
CAL, TAUS = "bench-cal-128", "bench-taus"
N_INPUTS = 128
CHUNK = 64
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class Series:
    """The synthetic series: per (function, head) a dormant rate that walks around one half; checkpoint i's
    indicators drawn from it (`--seed`), so checkpoint i is the same whenever it is written."""

    def __init__(self, n_layers: int, n_heads: int, seed: int, spread: float = 8.0):
        self.L, self.H, self.fns = n_layers, n_heads, list(DETERMINISTIC_IDS)
        self.seed = seed
        rng = np.random.default_rng([seed, 0])
        cells = len(self.fns) * n_layers * n_heads
        self.start = rng.uniform(-spread, spread, cells)  # [cell] logit of the rate at checkpoint 0
        self.step = rng.choice([0.02, 0.15], cells, p=[0.8, 0.2])  # most heads steady, a fifth wander

    def rate(self, i: int) -> np.ndarray:
        """[cell] dormant rate at checkpoint i (a reproducible walk: increments seeded by i)."""
        logit = self.start.copy()
        if i:
            walk = np.random.default_rng([self.seed, 1]).standard_normal((i, self.start.size))
            logit += self.step * walk.sum(axis=0)
        return 1 / (1 + np.exp(-logit))

    def rows(self, i: int, rate: np.ndarray) -> tuple[dict, pa.Table]:
        step = 1000 * (i + 1)
        revision = f"stage1-step{step}-tokens{step * 4}M"
        rng = np.random.default_rng([self.seed, 2, i])
        inactive = rng.random((N_INPUTS, rate.size)) < rate[None, :]  # [input, cell]
        k = inactive.sum(axis=0)
        n = rate.size
        per_fn = self.L * self.H
        table = pa.table(
            {
                "model_id": [MODEL] * n,
                "revision": [revision] * n,
                "stage": np.full(n, 1, np.int32),
                "step": np.full(n, step, np.int64),
                "tokens": np.full(n, step * 4_000_000, np.int64),
                "score_fn": np.repeat(np.array(self.fns, dtype=object), per_fn),
                "layer": np.tile(np.repeat(np.arange(self.L, dtype=np.int32), self.H), len(self.fns)),
                "head_index": np.tile(np.arange(self.H, dtype=np.int32), self.L * len(self.fns)),
                "score": rate,
                "score_std": np.zeros(n),
                "tau": np.full(n, 0.5),
                "direction": ["<"] * n,
                "dormant_rate": k / N_INPUTS,
                "dormant": k / N_INPUTS >= 0.5,
                "inactive_inputs": packed(inactive),
                "calibration_id": [CAL] * n,
                "taus_id": [TAUS] * n,
            }
        )
        row = dict(
            model_id=MODEL,
            revision=revision,
            stage=1,
            step=step,
            tokens=step * 4_000_000,
            commit=f"sha-{i}",
            n_layers=self.L,
            n_heads=self.H,
            calibration_id=CAL,
            n_inputs=N_INPUTS,
            dtype="float32",
            device="cpu",
            seconds=1.0,
            analyzed_at=T0 + timedelta(minutes=i),
            code_version="bench",
            taus_id=TAUS,
            scoring_version=SCORING_VERSION,
        )
        return row, table


def packed(inactive: np.ndarray) -> pa.Array:
    """`statistics.pack_inputs` of bool [input, head] as one binary column, built from one buffer (no list)."""
    data = np.ascontiguousarray(np.packbits(inactive, axis=0, bitorder="little").T)  # [head, byte]
    width = data.shape[1]
    offsets = np.arange(data.shape[0] + 1, dtype=np.int32) * width
    out = pa.Array.from_buffers(pa.binary(), data.shape[0], [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    assert out[0].as_py() == pack_inputs(inactive[:, :1])[0]
    return out


def new_store(root: Path, series: Series) -> None:
    n = len(series.fns)
    write_table(root, "taus", fixed_taus(MODEL, series.fns, [0.5] * n, ["<"] * n, CAL, TAUS), file_key="taus")


def commit(root: Path, series: Series, start: int, stop: int) -> None:
    """Checkpoints start..stop-1 committed one by one, their rates walked incrementally."""
    rate = series.rate(start)
    walk = np.random.default_rng([series.seed, 1]).standard_normal((stop, series.start.size))
    logit = np.log(rate / (1 - rate))
    for i in range(start, stop):
        if i > start:
            logit = logit + series.step * walk[i - 1]
        commit_checkpoint(root, *series.rows(i, 1 / (1 + np.exp(-logit))))


def derive_in_chunks(root: Path) -> None:
    """The series' transitions and histories as `derive_series` writes them (decision pending), from mask changes
    of CHUNK checkpoints at a time (a plain chain: consecutive chunks share one checkpoint)."""
    view = SeriesView.open(root, MODEL)
    ckpts = view.checkpoints_table()
    revs = view.revisions
    parts = []
    for a in range(0, len(revs) - 1, CHUNK):
        some = revs[a : a + CHUNK + 1]
        sub = ckpts.filter(pc.is_in(ckpts.column("revision"), value_set=pa.array(some)))
        parts.append(mask_changes(view.head_scores(revisions=some), sub)[0])
    trans = in_series_order(pa.concat_tables(parts), revs)
    hist = histories_of(states_from_transitions(view.head_scores(revisions=revs[:1]), trans, ckpts))
    trans = mark_blips(apply_decisions(trans, {}))
    meta = {PAIRS_KEY: __import__("json").dumps(sorted(series_pairs(view)[1])), DERIVED_BY_KEY: __version__}
    write_whole(view, trans, meta | {FDR_KEY: fdr_record(0.05, "bh"), DECISION_KEY: PENDING})
    write_table(
        root,
        "head_histories",
        hist,
        file_key=derived_file_key("head_histories", TAUS, CAL),
        model_id=MODEL,
        metadata=meta,
    )


def check_chunks(root: Path, n: int) -> None:
    """The chunked files equal `derive_series`' own on a copy (its whole-series path)."""
    copy = root.parent / "check"
    shutil.copytree(root, copy)
    for table in ("transitions", "head_histories"):
        shutil.rmtree(copy / table)
    derive_series(TrackRequest(source=MODEL, store=str(copy), report=False))
    a, b = SeriesView.open(root, MODEL), SeriesView.open(copy, MODEL)
    if not (a.stored_transitions().equals(b.stored_transitions()) and a.histories().equals(b.histories())):
        raise SystemExit(f"the chunked derivation differs from derive_series at {n} checkpoints")
    shutil.rmtree(copy)
    print(f"  check: the chunked files equal derive_series' at {n} checkpoints", flush=True)


def append(root: Path, series: Series, i: int, request: TrackRequest) -> float:
    """Commit checkpoint i (its rows built first, untimed: scoring is not the append) and derive: seconds."""
    rate = series.rate(i)
    row, table = series.rows(i, rate)
    t0 = time.perf_counter()
    commit_checkpoint(root, row, table)
    derive_series(request)
    return time.perf_counter() - t0


def decide(root: Path, k: int) -> tuple[float, float]:
    """The first read of the transitions after an append decides the whole series: (seconds reading every
    checkpoint's rates, seconds deciding all functions), the latter timed on the first `k` functions and scaled."""
    view = SeriesView.open(root, MODEL)
    meta = transitions_metadata(view)
    assert is_pending(meta)
    t0 = time.perf_counter()
    matrices = series_rates(view, derived_revisions(view, meta))
    read = time.perf_counter() - t0
    some = [m.score_fn for m in matrices[:k]]
    trans = view.stored_transitions(some)
    t0 = time.perf_counter()
    confirm_transitions(trans, matrices[:k])
    return read, (time.perf_counter() - t0) * len(matrices) / k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,300,1000,3000")
    parser.add_argument("--heads", default="32x32", help="LAYERSxHEADS (default: %(default)s)")
    parser.add_argument(
        "--repeats", type=int, default=PARTS_MAX + 1, help="appends timed per size (default: one cycle of parts)"
    )
    parser.add_argument("--decide-fns", type=int, default=1, help="functions decided per size (scaled to all)")
    parser.add_argument("--decide-max", type=int, default=1000, help="largest size whose decision is timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--spread", type=float, default=8.0, help="heads' starting logit rates in +-spread: less, more mask changes"
    )
    args = parser.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    n_layers, n_heads = (int(x) for x in args.heads.lower().split("x"))
    series = Series(n_layers, n_heads, args.seed, args.spread)
    t_all = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-appends-") as tmp:
        root = Path(tmp) / "store"
        request = TrackRequest(source=MODEL, store=str(root), report=False)
        new_store(root, series)
        have = 0
        for n in sizes:
            t0 = time.perf_counter()
            commit(root, series, have, n)
            derive_in_chunks(root)
            print(f"N={n}: built in {time.perf_counter() - t0:.0f} s", flush=True)
            if n == sizes[0]:
                check_chunks(root, n)
            have = n
            times = []
            for _ in range(args.repeats):
                times.append(append(root, series, have, request))
                have += 1
            k = min(args.decide_fns, len(series.fns))
            read, decided = decide(root, k) if n <= args.decide_max else (float("nan"), float("nan"))
            n_rows = SeriesView.open(root, MODEL).stored_transitions().num_rows
            typical, mean = statistics.median(times), statistics.fmean(times)
            rows.append((n, typical, max(times), mean, read + decided, n_rows))
            scaled = f" (timed on {k}, x {len(series.fns) / k:g})" if k < len(series.fns) else ""
            print(
                f"  append {typical:.3f} s (median of {len(times)}; the fold {max(times):.3f} s, the mean "
                f"{mean:.3f} s); decision {read + decided:.1f} s (read the rates {read:.1f} s, decide "
                f"{len(series.fns)} functions {decided:.1f} s{scaled}); {n_rows:,} mask changes",
                flush=True,
            )
    base = rows[0]
    print()
    print(
        f"appends: {n_layers}x{n_heads} heads x {len(series.fns)} functions x {N_INPUTS} inputs; per-input "
        f"indicators stored; {args.repeats} appends per size (a part each, the transitions written whole every "
        f"{PARTS_MAX + 1}); wall {time.perf_counter() - t_all:.0f} s"
    )
    b = f"x N={base[0]}"
    print(f"{'N':>6}  {'append':>8}  {b:>8}  {'fold':>7}  {'mean':>8}  {b:>8}  {'decide':>8}  {b:>8}  mask changes")
    for n, a, f, m, d, r in rows:
        print(
            f"{n:>6}  {a:>7.3f}s  {a / base[1]:>7.2f}x  {f:>6.2f}s  {m:>7.3f}s  {m / base[3]:>7.2f}x  {d:>7.1f}s  "
            f"{d / base[4]:>7.2f}x  {r:>12,}"
        )
    for label, col in (("append", 1), ("mean append", 3)):
        by = {r[0]: r[col] for r in rows}
        if 100 in by and 1000 in by:
            ratio = by[1000] / by[100]
            print(f"{label} at 1,000 / at 100: {ratio:.2f}x (target <= 1.5: {'met' if ratio <= 1.5 else 'MISSED'})")


if __name__ == "__main__":
    main()
