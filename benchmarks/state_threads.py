"""Does `decide_states` gain or lose from a multi-threaded BLAS? Wall and CPU seconds of one decision as it runs (its
tail with the BLAS limited to one thread, threadpoolctl) and with the BLAS at its default threads (the limit
lifted), side by side, and the two decisions compared.

    .venv/bin/python benchmarks/state_threads.py [--heads 512] [--checkpoints 100] [--repeats 2]

The series: section 1's mix of heads of benchmarks/findings_calibration.py (independent inputs, persistence 0.9,
128 inputs). The tail's matrix products (`cluster_states._aloe`: [head, checkpoint, cluster] x [cluster, sample]) are
small per chunk of heads, so threads mostly add synchronisation; on a machine whose cores are busy with other work
they add waiting. The ratio printed is default / one thread (> 1: one thread is faster).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from findings_calibration import Setting, indicators, trajectories  # noqa: E402

import dormant_tasks.statistics.cluster_states as cs  # noqa: E402
from dormant_tasks.statistics import decide_states  # noqa: E402


def once(x, clusters, pred):
    wall, cpu = time.perf_counter(), time.process_time()
    d = decide_states(x, clusters, pred)
    return time.perf_counter() - wall, time.process_time() - cpu, d


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heads", type=int, default=512)
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    rng = np.random.default_rng([0, 7])
    _, rate = trajectories(rng, args.heads)
    rates = np.stack([rate(t) for t in np.linspace(0, 1, args.checkpoints)])
    x, clusters = indicators(rng, rates, Setting(128, 1, 0.0, 0.9))
    pred = np.arange(args.checkpoints) - 1
    blas = ", ".join(f"{i['internal_api']} {i['num_threads']} threads" for i in threadpool_info())
    print(f"decide_states, {args.heads} heads x {args.checkpoints} checkpoints x 128 inputs; BLAS: {blas}")
    times: dict[str, list[tuple[float, float]]] = {"default": [], "one thread": []}
    decisions = {}
    for _ in range(args.repeats):  # interleaved, so that the machine's load falls on both alike
        for name in times:
            if name == "default":  # the limit lifted: the BLAS's own threads
                limit, cs.threadpool_limits = cs.threadpool_limits, lambda n: contextlib.nullcontext()
                try:
                    wall, cpu, d = once(x, clusters, pred)
                finally:
                    cs.threadpool_limits = limit
            else:
                wall, cpu, d = once(x, clusters, pred)
            times[name].append((wall, cpu))
            decisions[name] = d
    for name, t in times.items():
        wall, cpu = np.median(np.array(t), axis=0)
        print(f"  {name:<10}: {wall:6.2f} s wall, {cpu:6.2f} s CPU (median of {args.repeats})")
    (w0, c0), (w1, c1) = (np.median(np.array(t), axis=0) for t in times.values())
    print(f"  default / one thread: wall {w0 / w1:.2f}x, CPU {c0 / c1:.2f}x")
    a, b = decisions.values()
    same = np.array_equal(a.state, b.state) and np.allclose(a.head_p, b.head_p, rtol=1e-5, atol=0)
    print(
        f"  the same decision with either: {same} (head_p max relative difference "
        f"{float(np.max(np.abs(a.head_p - b.head_p) / np.maximum(a.head_p, 1e-300))):.1e})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
