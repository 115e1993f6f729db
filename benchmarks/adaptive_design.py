"""FDR of the confident-state decision when the checkpoints scored follow the data (`track --budget`), by
simulation with known truth (docs/SCORES.md §5, "Checkpoints chosen by the data").

Heads and their per-input indicators as in benchmarks/findings_calibration.py section 1 (`trajectories`:
constant heads, nulls hovering at 0.5 then moving away on their own side, 10% that change state by a step
0.3 <-> 0.7 or 0.4 <-> 0.6; `indicators`: clusters of inputs, inputs persistent across checkpoints), observed on a
dense grid of DENSE checkpoints: what an exhaustive run would score; and a stress case, fresh noise at every
checkpoint with the hovering nulls at 0.5 throughout, whose masks flicker everywhere (`at_the_boundary`). Three
designs score BUDGET of them:

- ADAPTIVE: what `track --budget` scores (`tracking.budgeted_search`, one at a time): a coarse pass log-spaced in
  tokens, the first and last checkpoint included, then refinement: between scored neighbours whose observed
  dormant rates say a mask changed (`tracking.budget.interval_need`), the middle checkpoint, the neediest interval
  first, until every change lies between adjacent checkpoints or the budget is spent. Which checkpoints are scored
  depends on every head's observed indicators, the tested head's own included.
- FIXED: BUDGET checkpoints evenly spaced, chosen before any data (the reference a fixed design gives).
- EXHAUSTIVE: every one of the DENSE checkpoints.

Each design's scored checkpoints go to `statistics.decide_states` (BH, q <= 0.05) as a series of their own. A head
called to change confident state is false when its true mask (rate >= 0.5) never changes. Measured: FDR (per
replicate false / called, 0 when none), power (the heads that move 0.3 <-> 0.7, called), and, of the ADAPTIVE
design's confident transitions (a head, its direction, its pair of scored confident checkpoints): the share that
the EXHAUSTIVE run also reports for that head and direction with an overlapping span, and the share of those of
truly changing heads whose pair holds the true change. Target: ADAPTIVE FDR <= 0.06.

    .venv/bin/python benchmarks/adaptive_design.py [--small] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the calibration benchmark's heads, from its file

import findings_calibration as fc  # noqa: E402

from dormant_tasks.statistics import decide_states  # noqa: E402
from dormant_tasks.tracking import budgeted_search  # noqa: E402

DENSE = 65  # checkpoints an exhaustive run scores
BUDGET = 17  # checkpoints the budgeted designs score
# fresh noise at every checkpoint (the nulls' masks flicker most: refinement chases them), twins, independent and
# blocks of 8 with persistent inputs (a null's error the same at every checkpoint the refinement adds)
SETTINGS = (
    fc.Setting(128, 1, 0.0, 0.25),
    fc.Setting(128, 2, 0.9, 0.9),
    fc.Setting(128, 1, 0.0, 0.99),
    fc.Setting(64, 8, 0.5, 0.99),
)
TITLE = "4. Checkpoints chosen by the data (`track --budget`): FDR under the adaptive design"


TOKENS_PER_CHECKPOINT = 1_000_000  # the dense grid's spacing (the search reads positions in tokens)


def adaptive(rates: np.ndarray, budget: int) -> list[int]:
    """The checkpoints a `track --budget` run scores (`tracking.budgeted_search`), sorted. rates: float [checkpoint,
    head] the observed dormant rates, read only where the search scores (what the run has seen)."""
    tokens = [(i + 1) * TOKENS_PER_CHECKPOINT for i in range(rates.shape[0])]
    scored = budgeted_search(tokens, budget, lambda indices: {i: rates[i] for i in indices})
    return sorted(scored)


def fixed(dense: int, budget: int) -> list[int]:
    return sorted({int(round(x)) for x in np.linspace(0, dense - 1, budget)})


def confident_transitions(state: np.ndarray, chosen: list[int]) -> set[tuple[int, int, int, int]]:
    """(head, direction +1 fell dormant / -1 woke, dense index of the confident checkpoint before, after): each
    change between consecutive confident states of opposite sign. state: int8 [scored checkpoint, head]."""
    out = set()
    for h in range(state.shape[1]):
        last = None
        for c in np.flatnonzero(state[:, h]):
            s = int(state[c, h])
            if last is not None and s != state[last, h]:
                out.add((h, s, chosen[last], chosen[c]))
            last = int(c)
    return out


def agree(reported: set, exhaustive: set) -> int:
    """Reported transitions that the exhaustive run also reports: the same head and direction, its span between
    confident checkpoints overlapping the reported pair's."""
    by_head: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for h, s, a, b in exhaustive:
        by_head.setdefault((h, s), []).append((a, b))
    return sum(any(x < b and a < y for x, y in by_head.get((h, s), ())) for h, s, a, b in reported)


def around_truth(reported: set, kind: np.ndarray, step: int) -> int:
    """Reported transitions of heads that truly change whose pair holds the true change (into checkpoint `step`)."""
    return sum(kind[h] >= 2 and a < step <= b for h, _, a, b in reported)


def at_the_boundary(rng: np.random.Generator, heads: int) -> tuple[np.ndarray, object]:
    """The stress case: `fc.trajectories` with its hovering nulls at 0.5 throughout (kind 1: their masks flicker at
    every checkpoint, so the refinement follows their noise wherever it lands)."""
    kind, rate = fc.trajectories(rng, heads)

    def at_half(t: float) -> np.ndarray:
        r = rate(t)
        r[kind == 1] = 0.5
        return r

    return kind, at_half


class Case:
    """A setting of the indicators and the heads' trajectories."""

    def __init__(self, setting, trajectories=fc.trajectories, note: str = ""):
        self.setting, self.trajectories = setting, trajectories
        self.name = setting.name + note


STRESS = Case(SETTINGS[0], at_the_boundary, "; 30% nulls at 0.5 throughout")


def cases_of(sizes) -> tuple:
    """Every setting and the stress case at the full sizes; at smaller ones (CI) the fresh-noise setting, which the
    refinement chases most, one persistent one and the stress case."""
    settings = SETTINGS if sizes.heads >= fc.FULL.heads else (SETTINGS[0], SETTINGS[2])
    return (*(Case(s) for s in settings), STRESS)


def run(sizes, seed: int) -> dict:
    """Per (setting, design): FDR per replicate, power per replicate, and the agreement counts (ADAPTIVE)."""
    out: dict = {}
    for si, case in enumerate(cases_of(sizes)):
        for rep in range(sizes.reps):
            rng = np.random.default_rng([seed, 41, si, rep])
            kind, rate = case.trajectories(rng, sizes.heads)
            rates = np.stack([rate(t) for t in np.linspace(0, 1, DENSE)])  # [checkpoint, head]
            x, clusters = fc.indicators(np.random.default_rng([seed, 43, si, rep]), rates, case.setting)
            observed = x.mean(axis=2)  # [checkpoint, head] the observed dormant rates
            designs = {
                "ADAPTIVE": adaptive(observed, BUDGET),
                "FIXED": fixed(DENSE, BUDGET),
                "EXHAUSTIVE": list(range(DENSE)),
            }
            found = {}
            for name, chosen in designs.items():
                d = decide_states(x[chosen], clusters, np.arange(len(chosen)) - 1, fdr=fc.FDR, method="bh")
                called = d.head_q <= fc.FDR
                out.setdefault((si, name, "fdp"), []).append((called & (kind < 2)).sum() / max(called.sum(), 1))
                out.setdefault((si, name, "power"), []).append(float(called[kind == 2].mean()))
                found[name] = confident_transitions(np.where(called[None], d.state, 0), chosen)
            reported = found["ADAPTIVE"]
            out.setdefault((si, "agree"), []).append((agree(reported, found["EXHAUSTIVE"]), len(reported)))
            step = int(np.argmax(np.linspace(0, 1, DENSE) >= 0.4))  # the movers' step: into this checkpoint
            movers = sum(kind[h] >= 2 for h, *_ in reported)
            out.setdefault((si, "truth"), []).append((around_truth(reported, kind, step), movers))
    return out


def section_adaptive(sizes, seed: int) -> list:
    """The rows of the calibration benchmark's section 4 (`fc.Row`), from `run`."""
    out = run(sizes, seed)
    rows, pooled = [], []
    for si, case in enumerate(cases_of(sizes)):
        for name in ("ADAPTIVE", "FIXED", "EXHAUSTIVE"):
            size = {"ADAPTIVE": f"<= {BUDGET}", "FIXED": str(BUDGET), "EXHAUSTIVE": str(DENSE)}[name]
            label = f"{name} decide_states bh, {size} of {DENSE} checkpoints"
            fdp = out[si, name, "fdp"]
            v, se = fc.mean_se(fdp)
            ok, exact = fc.at_most(0.06, v, se) if name == "ADAPTIVE" else (None, True)
            target = "<= 0.06" if name == "ADAPTIVE" else "-"
            rows.append(fc.Row("4", label, case.name, "FDR", v, se, target, ok, exact))
            v, se = fc.mean_se(out[si, name, "power"])
            rows.append(fc.Row("4", label, case.name, "power 0.3->0.7", v, se, "-", None))
            if name == "ADAPTIVE":
                pooled += fdp
        for key, label, measured in (
            ("agree", "ADAPTIVE vs EXHAUSTIVE", "share the exhaustive run reports (head, direction, span)"),
            ("truth", "ADAPTIVE vs the truth", "share of the movers' whose pair holds the true change"),
        ):
            hits, total = (sum(x) for x in zip(*out[si, key]))
            if not total:  # no confident transition to compare
                continue
            share = hits / total
            se = float(np.sqrt(share * (1 - share) / total))
            rows.append(
                fc.Row("4", f"{label} ({total} confident transitions)", case.name, measured, share, se, "-", None)
            )
    v, se = fc.mean_se(pooled)
    rows.append(fc.Row("4", "ADAPTIVE decide_states bh", "every setting (pooled)", "FDR", v, se, "<= 0.06", v <= 0.06))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="CI sizes (the calibration benchmark's --small)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = fc.SMALL if args.small else fc.FULL
    start = time.perf_counter()
    rows = section_adaptive(sizes, args.seed)
    print(f"## {TITLE}\n\n{sizes.heads} heads, {sizes.reps} replicates per setting, seed {args.seed}\n")
    print(fc.table(rows))
    print(f"\n({time.perf_counter() - start:.1f} s)")
    return 1 if any(r.passed is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
