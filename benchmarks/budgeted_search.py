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

**Dense tiny series** (`--tiny`, a real track run on CPU): a series made dense by interpolating weights
between the 8 tiny pretrained checkpoints of `dormant pretrain-tiny` (9 intervals between two: 64 checkpoints),
tracked in full; the exhaustive run's confident transitions are the truth. The budgeted search's choices at
10%, 25% and 50% are replayed on the exhaustive store's rates (a real budgeted run makes the same ones:
`--real` runs the 50% one and says so), against `--max` of the same size and the naive bisection.

    .venv/bin/python benchmarks/budgeted_search.py [--seeds 20] [--sizes 200,2000]
    .venv/bin/python benchmarks/budgeted_search.py --sizes 200 --seeds 1 --tiny [--anchors DIR] [--real]
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
    return located_changes([c for _, c in truth.changes], scored)


def located_changes(changes, scored) -> tuple[float, float]:
    """`located` for changes given as the index of the first checkpoint after each."""
    done = np.array(sorted(scored))
    gaps = []
    for c in changes:
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


# ------------------------------------------------------------------------------------------ dense tiny series


def dense_series(anchors: Path, out: Path, per_segment: int) -> list[str]:
    """Checkpoints on the straight lines between the anchors' weights (series order), `per_segment` intervals
    between two anchors, the anchors included: 8 anchors and 9 give 64. Names carry the interpolated tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dormant_tasks.checkpoints import list_revisions

    revisions = [r for r in list_revisions(str(anchors), False).revisions]
    tokenizer = AutoTokenizer.from_pretrained(revisions[0].path)
    models = [AutoModelForCausalLM.from_pretrained(r.path) for r in revisions]
    states = [{k: v.clone() for k, v in m.state_dict().items()} for m in models]
    model, names = models[0], []
    for a in range(len(revisions) - 1):
        last = a == len(revisions) - 2
        for k in range(per_segment + (1 if last else 0)):
            t = k / per_segment
            model.load_state_dict({key: (1 - t) * states[a][key] + t * states[a + 1][key] for key in states[a]})
            step = per_segment * revisions[a].step + k * (revisions[a + 1].step - revisions[a].step)
            tokens = round((1 - t) * revisions[a].tokens + t * revisions[a + 1].tokens)
            name = f"stage1-step{step}-tokens{tokens}"
            model.save_pretrained(out / name)
            tokenizer.save_pretrained(out / name)
            names.append(name)
    return names


def track_library(request) -> None:
    """A track run through the library's steps (as the flow runs them, local runner), without Prefect."""
    from functools import partial

    from dormant_tasks import tracking

    state = tracking.series_state(request)
    series = tracking.resolve_series_taus(request, state)
    pending = tracking.pending_revisions(request, state, series)

    def run(revisions):
        return [
            tracking.write_checkpoint(
                request, r, tracking.checkpoint_outcome(partial(tracking.compute_checkpoint, request, r, series))
            )
            for r in revisions
        ]

    if request.budget is None:
        run(pending)
    else:
        tracking.run_budgeted(request, state.plan.selected, pending, run)
    tracking.derive_series(request)


def tiny_section(anchors: str | None, per_segment: int, limit: int, real: bool, work_dir: str | None = None) -> None:
    """The exhaustive run is real; the budgeted runs' choices are the search replayed on its stored rates (the
    taus are the series', so a checkpoint's rates are the same in any run of it: tests/library/tracking/
    test_budget_series.py checks that a real budgeted run makes exactly these choices). `real`: also the 50%
    budget as a real run, its choices compared with the replay's and its confident transitions with the
    exhaustive run's."""
    import os
    import tempfile
    import time

    os.environ.setdefault("TQDM_DISABLE", "1")
    from dormant_tasks.tracking import SeriesView, TrackRequest
    from dormant_tasks.tracking.budget import available_positions
    from dormant_tasks.tracking.tracker import stored_rates

    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="budgeted-search-"))
    folder = work / "dense-tiny"
    if folder.exists():  # an earlier run's series (and its stores: the exhaustive run then scores nothing)
        from dormant_tasks.checkpoints import list_revisions

        names = [r.name for r in list_revisions(str(folder), False).revisions]
    else:
        if anchors is None:
            from dormant_tasks.tiny import pretrain_tiny

            anchors = str(pretrain_tiny(work / "anchors", progress=False).out)
        names = dense_series(Path(anchors), folder, per_segment)
    print(f"work folder: {work}")
    order = {n: i for i, n in enumerate(names)}

    def request(store: str, budget=None):
        return TrackRequest(
            source=str(folder),
            store=str(work / store),
            limit=limit,
            score_fns=("ahon", "ahon_ln"),
            device="cpu",
            report=False,
            budget=budget,
        )

    started = time.perf_counter()
    full = request("exhaustive")
    track_library(full)
    view = SeriesView.open(full.store, full.model_id)
    truth = [t for t in view.transitions().to_pylist() if t["confident"]]
    changes = [order[t["to_revision"]] for t in truth]
    print(
        f"\nDense tiny series: {len(names)} checkpoints ({per_segment} intervals between each two of the tiny "
        f"pretrained ones), ahon and ahon_ln, {limit} texts; the exhaustive run: {len(truth)} confident "
        f"transitions at {len(set(changes))} places ({time.perf_counter() - started:.0f} s)"
    )
    revisions = [view.revision(n) for n in names]
    positions, one_step = available_positions(revisions)
    rates = stored_rates(full, revisions)
    series = Truth(np.array([rates[n] for n in names]), tuple((0, c) for c in changes))
    rows = []
    for share in SHARES:
        budget = round(share * len(names))
        replay = sorted(
            budgeted_search(positions, budget, lambda idx: {i: series.rates[i] for i in idx}, one_step=one_step)
        )
        grid = coarse_pass(positions, budget, one_step)
        rows.append(
            (
                len(names),
                f"{share:.0%}",
                budget,
                *located_changes(changes, replay),
                *located_changes(changes, grid),
                *located(series, run_bisection(series, budget)),
            )
        )
        if real and share == SHARES[-1]:
            run = request(f"budget-{budget}", budget)
            track_library(run)
            kept = SeriesView.open(run.store, run.model_id)
            ok, total = _agreeing(kept.transitions().to_pylist(), truth, order)
            same = [order[n] for n in kept.revisions] == replay
            print(
                f"real run, budget {budget}: {'the same checkpoints as the replay' if same else 'OTHER checkpoints'}"
                f"; {ok} of its {total} confident transitions agree with the exhaustive run"
            )
    print("| available | budget | N | " + " | ".join(f"{m}: adjacent | {m}: gap" for m in METHODS) + " |")
    print("|" + "---|" * (3 + 2 * len(METHODS)))
    for n, share, budget, *vals in rows:
        cells = [f"{v:.0%}" if i % 2 == 0 else f"{v:.2f}" for i, v in enumerate(vals)]
        print(f"| {n} | {share} | {budget} | " + " | ".join(cells) + " |")


def _agreeing(reported: list[dict], truth: list[dict], order: dict) -> tuple[int, int]:
    """How many of the budgeted run's confident transitions the exhaustive run has (same head, function and
    direction, its confident location inside the confident checkpoints the budgeted one goes between), of how
    many."""
    confident = [t for t in reported if t["confident"]]
    ok = 0
    for t in confident:
        lo, hi = order[t["from_confident_revision"]], order[t["to_confident_revision"]]  # what it claims
        key = (t["score_fn"], t["layer"], t["head_index"], t["from_state"], t["to_state"])
        ok += any(
            (e["score_fn"], e["layer"], e["head_index"], e["from_state"], e["to_state"]) == key
            and lo <= order[e["from_revision"]] < order[e["to_revision"]] <= hi
            for e in truth
        )
    return ok, len(confident)


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
    parser.add_argument(
        "--anchors",
        metavar="DIR",
        help="the tiny pretrained series to interpolate (default: `pretrain_tiny` into a temporary folder)",
    )
    parser.add_argument("--per-segment", type=int, default=9, help="intervals between two anchors (default: 9)")
    parser.add_argument("--limit", type=int, default=64, help="calibration texts (default: 64)")
    parser.add_argument("--real", action="store_true", help="also run the 50%% budget for real (slower)")
    parser.add_argument("--work", metavar="DIR", help="the work folder: an earlier --tiny run's is reused")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    print_table(
        f"Synthetic truth ({args.seeds} seeds each; 64 heads, 1 in 8 near 0.5, blips on 1 in 8)",
        synthetic_table(sizes, args.seeds),
    )
    if args.tiny:
        tiny_section(args.anchors, args.per_segment, args.limit, args.real, args.work)


if __name__ == "__main__":
    main()
