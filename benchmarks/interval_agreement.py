"""One reading of a state: do a series' dormant-rate intervals and its confident transitions agree?

    .venv/bin/python benchmarks/interval_agreement.py --store DIR --model ID [--fdr 0.05]

For every calibration set and function of a tracked series (with per-input indicators), a *clear change* is a head
whose rate interval lies wholly above 0.6 at one checkpoint and wholly below 0.4 at a later one on the same path (or
the reverse). Each such change should be a confident transition of the decision (`decide_states`: the head called,
its states at the two checkpoints confident and opposite). Counted for three intervals:

- `Wilson, inputs independent`: what head_scores stored before (the 95% Wilson interval of k of n);
- `stored, states' rule`: what head_scores stores now (`statistics.checkpoint_rate_interval`: one checkpoint, the
  inputs' clusters, a single 95% test);
- `decision's`: `StateDecision.rate_low/high` (the decision's clusters and critical |z|): every clear change is a
  confident transition by construction, which this checks on real data.

Prints per set and function: clear changes / of them without a confident transition, for each interval.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def clear_changes(low: np.ndarray, high: np.ndarray, pred: np.ndarray) -> list[tuple[int, int, int]]:
    """(head, i, j), i before j on a path: the interval above 0.6 at one and below 0.4 at the other."""
    out = []
    for j in range(low.shape[0]):
        i = pred[j]
        while i >= 0:
            sure = ((low[i] > 0.6) & (high[j] < 0.4)) | ((high[i] < 0.4) & (low[j] > 0.6))
            out += [(int(h), int(i), int(j)) for h in np.flatnonzero(sure)]
            i = pred[i]
    return out


def main(argv=None) -> int:
    from dormant_tasks.statistics import checkpoint_rate_interval, decide_states, wilson_interval
    from dormant_tasks.tracking import open_views

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--fdr", type=float, default=0.05)
    args = parser.parse_args(argv)
    totals = np.zeros((3, 2), dtype=np.int64)
    names = ("Wilson, inputs independent", "stored, states' rule", "decision's")
    for view in open_views(args.store, args.model):
        for s in view.states():
            if s.inactive is None:
                continue
            x, pred = s.inactive, s.predecessor
            d = decide_states(x, s.clusters, pred, fdr=args.fdr)
            n = x.shape[-1]
            stored = [checkpoint_rate_interval(x[t], s.clusters) for t in range(x.shape[0])]
            intervals = (
                wilson_interval(x.sum(axis=-1), n),
                (np.stack([a for a, _ in stored]), np.stack([b for _, b in stored])),
                (d.rate_low, d.rate_high),
            )
            cells = []
            for k, (low, high) in enumerate(intervals):
                clear = clear_changes(low, high, pred)
                missing = [
                    c
                    for c in clear
                    if not (d.head_q[c[0]] <= d.fdr and d.state[c[1], c[0]] == -d.state[c[2], c[0]] != 0)
                ]
                totals[k] += (len(clear), len(missing))
                cells.append(f"{len(clear)} / {len(missing)}")
            print(
                f"{view.calibration_id} {s.score_fn} ({d.clusters.describe()}): "
                + "; ".join(f"{name} {cell}" for name, cell in zip(names, cells))
            )
    print(
        "all: "
        + "; ".join(f"{name} {c} clear, {m} without a confident transition" for name, (c, m) in zip(names, totals))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
