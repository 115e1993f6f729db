"""How well `track --budget` locates the changes of a series, against a log grid of the same size.

Two sections. **Synthetic truth** (the search alone, `tracking.budget.budgeted_search`, no model): a series of
200 or 2,000 available checkpoints, evenly spaced in steps; heads with 0 to 3 changes of state, their times
drawn around a few events placed log-uniformly in the series (so changes are dense early, as in pretraining,
and several heads change near one place); heads whose rate hovers near 0.5 (their masks flip at random, never
a confident state), and blips (one checkpoint's excursion). A head's dormant rate is 0.15 awake or 0.85
dormant, plus noise. For budgets of 10%, 25% and 50% of the series it prints, over the true changes of the
stable heads: the share located between adjacent available checkpoints (`adjacent`) and the mean gap, in
available checkpoints, between the scored neighbours around each change (`gap`); for the budgeted search, a
log grid of the same size (`--max N`) and a naive bisection (a coarse log grid of half the budget, then
every interval whose masks differ split in the middle, round after round). Seeds are fixed: the same numbers
every run.

**Dense tiny series** (`--tiny`, real `dormant track` runs on CPU, a few minutes): a series made dense by
interpolating weights between the tiny pretrained checkpoints of `dormant pretrain-tiny`, tracked in full
(the exhaustive run's confident transitions are the truth), then with `--budget` and with `--max` of 10%, 25%
and 50% of it.

    .venv/bin/python benchmarks/budgeted_search.py [--seeds 20] [--tiny]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dormant_tasks.tracking import budgeted_search, coarse_pass  # noqa: E402

AWAKE, DORMANT, NOISE = 0.15, 0.85, 0.05
SHARES = (0.10, 0.25, 0.50)


@dataclass(frozen=True)
class Truth:
    """A synthetic series: `rates` [checkpoint, head]; `changes` (head, index of the first checkpoint after)."""

    rates: np.ndarray
    changes: tuple[tuple[int, int], ...]

    @property
    def tokens(self) -> list[int]:
        return [1000 * i for i in range(len(self.rates))]


def synthetic_truth(n: int, seed: int, heads: int = 64, events: int = 12) -> Truth:
    """`heads` heads over `n` checkpoints: 1 in 8 near 0.5, the rest with 0-3 changes around `events` places
    drawn log-uniformly over the series (jittered by a few checkpoints), and a blip on 1 head in 8."""
    rng = np.random.default_rng(seed)
    places = np.unique(np.clip(np.round(np.exp(rng.uniform(0, math.log(n - 1), events))), 1, n - 1).astype(int))
    rates = np.empty((n, heads))
    changes = []
    for h in range(heads):
        if h % 8 == 7:  # near 0.5: its mask flips at random
            rates[:, h] = np.clip(0.5 + rng.normal(0, 0.06, n), 0, 1)
            continue
        count = rng.choice(4, p=(0.35, 0.35, 0.2, 0.1))
        jitter = rng.integers(-2, 3, count)
        at = sorted({int(np.clip(rng.choice(places) + j, 1, n - 1)) for j in jitter})
        state = np.zeros(n, dtype=bool)
        state[:] = rng.random() < 0.3
        for c in at:
            state[c:] = ~state[c:]
        changes += [(h, c) for c in at]
        rates[:, h] = np.clip(np.where(state, DORMANT, AWAKE) + rng.normal(0, NOISE, n), 0, 1)
        if h % 8 == 3:  # a blip: one checkpoint's excursion, no change of state
            b = int(rng.integers(1, n - 1))
            rates[b, h] = 1 - rates[b, h]
    return Truth(rates, tuple(changes))


def located(truth: Truth, scored) -> tuple[float, float]:
    """(share of the true changes between adjacent scored checkpoints, mean gap around them)."""
    done = np.array(sorted(scored))
    gaps = []
    for _, c in truth.changes:
        lo = done[np.searchsorted(done, c, side="left") - 1]
        hi = done[np.searchsorted(done, c, side="left")]
        gaps.append(hi - lo)
    gaps_a = np.array(gaps)
    return float(np.mean(gaps_a == 1)), float(np.mean(gaps_a))


def run_budget(truth: Truth, budget: int) -> list[int]:
    return sorted(budgeted_search(truth.tokens, budget, lambda idx: {i: truth.rates[i] for i in idx}))


def run_grid(truth: Truth, budget: int) -> list[int]:
    return coarse_pass(truth.tokens, budget)


def run_bisection(truth: Truth, budget: int) -> list[int]:
    """Naive bisection: a log grid of half the budget, then, round after round, every interval whose masks
    differ on any head split in the middle, in series order, until the budget is spent."""
    scored = set(coarse_pass(truth.tokens, max(2, budget // 2)))
    masks = truth.rates >= 0.5
    while len(scored) < budget:
        done = sorted(scored)
        splits = [(a + b) // 2 for a, b in zip(done, done[1:]) if b - a > 1 and (masks[a] != masks[b]).any()]
        if not splits:
            break
        scored.update(splits[: budget - len(scored)])
    return sorted(scored)


METHODS = {"budget": run_budget, "log grid": run_grid, "bisection": run_bisection}


def synthetic_table(sizes=(200, 2000), seeds: int = 20) -> list[tuple]:
    rows = []
    for n in sizes:
        truths = [synthetic_truth(n, seed) for seed in range(seeds)]
        for share in SHARES:
            budget = round(share * n)
            row: list = [n, f"{share:.0%}", budget]
            for method in METHODS.values():
                results = [located(t, method(t, budget)) for t in truths]
                row += [np.mean([r[0] for r in results]), np.mean([r[1] for r in results])]
            rows.append(tuple(row))
    return rows


def print_table(title: str, rows: list[tuple]) -> None:
    print(title)
    head = "| available | budget | N | " + " | ".join(f"{m}: adjacent | {m}: gap" for m in METHODS) + " |"
    print(head)
    print("|" + "---|" * (3 + 2 * len(METHODS)))
    for n, share, budget, *vals in rows:
        cells = [f"{v:.0%}" if i % 2 == 0 else f"{v:.2f}" for i, v in enumerate(vals)]
        print(f"| {n} | {share} | {budget} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--sizes", default="200,2000")
    parser.add_argument("--tiny", action="store_true", help="also the dense tiny series (real track runs)")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    print_table(
        f"Synthetic truth ({args.seeds} seeds each; 64 heads, 1 in 8 near 0.5, blips on 1 in 8)",
        synthetic_table(sizes, args.seeds),
    )
    if args.tiny:
        from budgeted_tiny import tiny_table  # noqa: PLC0415

        tiny_table()


if __name__ == "__main__":
    main()
