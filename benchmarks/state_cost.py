"""What one `decide_states` costs, side by side: (1) the CPU at T = 100 and T = 1,000 checkpoints (256 heads x 128
inputs; target: the ratio at most 11, linear in T) and (2) the tail with the nodes the bounds settle skipped
(`cluster_states.settled_below`) against every node estimated, with the two decisions compared (their states,
head_p, q-values, level and rate intervals must be identical; state_p may differ only below the settled |z|).

    .venv/bin/python benchmarks/state_cost.py [--heads 256] [--repeats 2] [--skip-only]

The series: section 1's mix of heads of benchmarks/findings_calibration.py (independent inputs and twins, persistence
0.9, 128 inputs). CPU seconds (`time.process_time`), the median of `--repeats`, the runs interleaved so that the
machine's load falls on both alike.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from findings_calibration import Setting, indicators, trajectories  # noqa: E402

import dormant_tasks.statistics.cluster_states as cs  # noqa: E402

FIELDS = ("state", "head_p", "head_q", "rate_low", "rate_high")


def series(heads: int, n_ckpt: int, setting: Setting, seed: int = 7):
    rng = np.random.default_rng([0, seed])
    _, rate = trajectories(rng, heads)
    rates = np.stack([rate(t) for t in np.linspace(0, 1, n_ckpt)])
    x, clusters = indicators(rng, rates, setting)
    return x, clusters, np.arange(n_ckpt) - 1


def cpu(x, clusters, pred):
    start = time.process_time()
    d = cs.decide_states(x, clusters, pred)
    return time.process_time() - start, d


def every_node(reach, fdr, method):  # the tail before the skip: every node up to the largest |z|
    return np.zeros_like(reach)


def linear_in_t(heads: int, repeats: int) -> None:
    setting = Setting(128, 1, 0.0, 0.9)
    data = {t: series(heads, t, setting) for t in (100, 1000)}
    got: dict[int, list[float]] = {100: [], 1000: []}
    for _ in range(repeats):
        for t, (x, clusters, pred) in data.items():
            got[t].append(cpu(x, clusters, pred)[0])
    a, b = (float(np.median(got[t])) for t in (100, 1000))
    verdict = "met" if b / a <= 11 else "MISSED"
    print(f"1. linear in T ({heads} heads x 128 inputs, {setting.name}): T = 100 {a:.2f} s CPU, T = 1,000 {b:.2f} s")
    print(f"   ratio {b / a:.2f}x (target <= 11: {verdict}; median of {repeats})")


def settled_skip(heads: int, n_ckpt: int, repeats: int) -> None:
    print(f"2. nodes the bounds settle, skipped vs every node estimated ({heads} heads x {n_ckpt} checkpoints):")
    real = cs.settled_below
    for setting in (Setting(128, 1, 0.0, 0.9), Setting(128, 2, 0.9, 0.9)):
        x, clusters, pred = series(heads, n_ckpt, setting)
        got: dict[str, list[float]] = {"every node": [], "settled skipped": []}
        out = {}
        for _ in range(repeats):
            for name in got:
                cs.settled_below = every_node if name == "every node" else real
                try:
                    seconds, out[name] = cpu(x, clusters, pred)
                finally:
                    cs.settled_below = real
                got[name].append(seconds)
        a, b = out.values()
        same = all(np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True) for f in FIELDS) and a.level == b.level
        sure = a.state != 0
        moved = a.state_p != b.state_p
        t0, t1 = (float(np.median(v)) for v in got.values())
        print(
            f"   {setting.name}: every node {t0:.2f} s CPU, settled skipped {t1:.2f} s ({t0 / t1:.2f}x faster); "
            f"states, head_p, q, level and rate intervals identical: {same}; state_p at confident states identical: "
            f"{np.array_equal(a.state_p[sure], b.state_p[sure])}; {a.n_selected} heads selected; state_p differs at "
            f"{int(moved.sum())} of {moved.size} (all unconfident: {not (moved & sure).any()})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heads", type=int, default=256)
    parser.add_argument("--checkpoints", type=int, default=200, help="of part 2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-only", action="store_true", help="part 2 only")
    args = parser.parse_args(argv)
    if not args.skip_only:
        linear_in_t(args.heads, args.repeats)
    settled_skip(args.heads, args.checkpoints, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
