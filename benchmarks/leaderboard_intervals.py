"""How sure a leaderboard value is, by simulation with known truth (docs/SCORES.md §6).

Run: `python benchmarks/leaderboard_intervals.py [--small] [--items N] [--seed S]` (about 20 s at the default
size on 2 cores; `--small` for CI). Prints a Markdown table for docs/SCORES.md.

Simulated curves: N items (400), zeroing at 0, 5, ..., 30 % of heads, each item right while its difficulty u_i
is below the true accuracy at that share (so the settings are paired as zeroing is: an item lost at 10 % stays
lost at 20 %, plus a few items that flip either way). The true value is the "% zeroed within 1 point" of the
true accuracy curve (the metric of `evaluation.metric` on the population), known exactly.

1. Coverage: how often the nominal 95% interval of `evaluation.intervals` (paired bootstrap over items,
   percentile) holds the true value, over simulated data sets, per kind of true curve (a steady decline, a
   flat curve that crosses late, one that falls at once).
2. Selection: 13 functions whose curves are all the same truth (every true value equal); "best of 13" chosen and
   reported on the same items reads high by the amount shown; chosen on the even items and reported on the odd
   ones it does not (its mean error is about 0, its spread that of half the items).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dormant_tasks.evaluation.intervals import CurveItems, ItemResampling  # noqa: E402
from dormant_tasks.evaluation.metric import pct_zeroed_within_1pt, pct_zeroed_within_1pt_many  # noqa: E402

X = np.array([0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0])  # % of heads zeroed at each threshold
BASE = 0.75
CURVES = {  # true accuracy drop, in points, at each x
    "steady decline": np.array([0.0, 0.2, 0.6, 1.2, 2.0, 3.0, 4.5]),
    "flat, late crossing": np.array([0.0, 0.1, 0.2, 0.3, 0.5, 0.8, 1.5]),
    "falls at once": np.array([0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]),
}
FLIP = 0.01  # share of items whose answer flips at random at each threshold (zeroing is not purely monotone)


def simulate(rng, n: int, drops: np.ndarray) -> CurveItems:
    """One data set: the base run and each threshold's outcome on n items."""
    u = rng.random(n)
    base = u < BASE
    correct = np.array([u < BASE - d / 100 for d in drops])  # [point, item]
    flips = rng.random(correct.shape) < FLIP
    correct ^= flips & (rng.random(correct.shape) < 0.5)
    return CurveItems(tuple(("sim", i) for i in range(n)), base, correct)


def true_value(drops: np.ndarray) -> float:
    """The metric of the population curve (flips are symmetric, so they move accuracies by FLIP/2 * (1 - 2p))."""
    p = BASE - drops / 100
    p = p * (1 - FLIP / 2) + (1 - p) * FLIP / 2  # the expected accuracy after symmetric flips
    return pct_zeroed_within_1pt(list(zip(X, 100 * p)), 100 * BASE)


def coverage(rng, n: int, datasets: int, resamples: int) -> list[tuple[str, float, float, float, float]]:
    """(curve, true value, coverage, mean width, mean |estimate - truth|) per kind of curve."""
    out = []
    for name, drops in CURVES.items():
        truth = true_value(drops)
        hits, widths, errors = 0, [], []
        for k in range(datasets):
            c = simulate(rng, n, drops)
            resampling = ItemResampling(resamples, k)
            base, acc = c.accuracies(resampling.weights([c]))
            values = pct_zeroed_within_1pt_many(X, acc, base)
            low, high = np.percentile(values, [2.5, 97.5])
            hits += low <= truth <= high
            widths.append(high - low)
            errors.append(
                abs(pct_zeroed_within_1pt(list(zip(X, 100 * c.correct.mean(axis=1))), 100 * c.base.mean()) - truth)
            )
        out.append((name, truth, hits / datasets, float(np.mean(widths)), float(np.mean(errors))))
    return out


def selection(rng, n: int, datasets: int, functions: int = 13) -> tuple[float, ...]:
    """(truth, mean of one function on all items, on the odd items, mean best-of-13 on the same items, mean
    chosen-on-even reported-on-odd, its sd)."""
    drops = CURVES["steady decline"]
    truth = true_value(drops)
    one, half, same, split = [], [], [], []
    even = np.arange(n) % 2 == 0
    for _ in range(datasets):
        u = rng.random(n)
        base = u < BASE
        values = np.empty((functions, 3))  # [function, all / even / odd items]
        for f in range(functions):
            correct = np.array([u < BASE - d / 100 for d in drops])
            flips = rng.random(correct.shape) < FLIP
            correct ^= flips & (rng.random(correct.shape) < 0.5)
            for j, keep in enumerate((np.ones(n, dtype=bool), even, ~even)):
                points = list(zip(X, 100 * correct[:, keep].mean(axis=1)))
                values[f, j] = pct_zeroed_within_1pt(points, 100 * base[keep].mean())
        one.append(values[0, 0])
        half.append(values[0, 2])
        same.append(values[:, 0].max())
        split.append(values[int(np.argmax(values[:, 1])), 2])
    means = (np.mean(one), np.mean(half), np.mean(same), np.mean(split), np.std(split))
    return truth, *(float(m) for m in means)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="a quick run for CI (fewer data sets and resamples)")
    p.add_argument("--items", type=int, default=400, help="items per data set (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation (default: %(default)s)")
    args = p.parse_args(argv)
    datasets, resamples, selections = (40, 200, 40) if args.small else (200, 1000, 200)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = coverage(rng, args.items, datasets, resamples)
    truth, one, half, same, split, split_sd = selection(rng, args.items, selections)
    seconds = time.perf_counter() - start
    se = 100 * np.sqrt(BASE * (1 - BASE) / args.items)
    print(
        f"{args.items} items (binomial SE of one accuracy {se:.2f} points), {datasets} data sets per curve, "
        f"{resamples} resamples each, seed {args.seed}; {seconds:.0f} s\n"
    )
    print("| true curve | true value | coverage of the 95% interval | mean width | mean error of the value |")
    print("|---|---:|---:|---:|---:|")
    for name, t, cov, width, error in rows:
        print(f"| {name} | {t:.2f} | {100 * cov:.0f}% | {width:.2f} | {error:.2f} |")
    print(f"\n13 functions with the same true curve (true value {truth:.2f}), {selections} data sets:\n")
    print("| what is reported | mean value | bias |")
    print("|---|---:|---:|")
    print(f"| one function | {one:.2f} | {one - truth:+.2f} |")
    print(f"| one function, on the odd items only | {half:.2f} | {half - truth:+.2f} |")
    print(f"| best of 13, chosen and reported on the same items | {same:.2f} | {same - truth:+.2f} |")
    print(
        f"| best of 13, chosen on the even items, reported on the odd | {split:.2f} | {split - truth:+.2f} "
        f"(sd {split_sd:.2f}) |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
