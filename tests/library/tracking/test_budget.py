"""The budgeted search's choices (`tracking.budget`), checked against brute force on synthetic truth: no model,
no store."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dormant_tasks.checkpoints import Revision, Selection
from dormant_tasks.tracking import budgeted_search, coarse_pass, first_pass, next_refinements
from dormant_tasks.tracking.budget import COARSE_SHARE, MOVED, coarse_size, interval_need


def truth(n: int, changes: dict[int, list[int]], heads: int = 6, seed: int = 0) -> np.ndarray:
    """Rates [checkpoint, head]: head h flips at each index of changes[h] (0.1 awake, 0.9 dormant, small noise)."""
    rng = np.random.default_rng(seed)
    state = np.zeros((n, heads), dtype=bool)
    for h, at in changes.items():
        for c in at:
            state[c:, h] = ~state[c:, h]
    return np.clip(np.where(state, 0.9, 0.1) + rng.normal(0, 0.02, (n, heads)), 0, 1)


def scorer(rates: np.ndarray, log: list | None = None, fail=()):
    def score(indices):
        if log is not None:
            log.append(list(indices))
        return {i: (None if i in fail else rates[i]) for i in indices}

    return score


def bracket(scored, c: int) -> tuple[int, int]:
    """The scored neighbours around a change at index c (between c - 1 and c), by brute force."""
    return max(s for s in scored if s <= c - 1), min(s for s in scored if s >= c)


# ------------------------------------------------------------------------------------------ coarse pass


def test_coarse_pass_is_the_max_grid_of_the_same_series():
    """The coarse pass and `--max n` are one rule: on the demo's token axis, the same checkpoints."""
    steps = [0, 10, 25, 50, 100, 250, 500, 1000, 1500, 2000]
    revisions = [Revision(f"step{s}", 1, s, 1000 * s) for s in steps]
    for n in range(1, len(steps) + 2):
        grid = Selection(max_n=n).apply(revisions)
        picked = coarse_pass([r.tokens for r in revisions], n, one_step=1000)
        assert [revisions[i] for i in picked] == grid


@pytest.mark.parametrize("n", [2, 3, 7, 20])
def test_coarse_pass_first_last_distinct_deterministic(n):
    tokens = [1000 * i for i in range(50)]
    picked = coarse_pass(tokens, n)
    assert picked == sorted(set(picked)) and len(picked) == n
    assert picked[0] == 0 and picked[-1] == 49
    assert picked == coarse_pass(list(tokens), n)
    # log-spaced: denser early than late
    assert picked[1] - picked[0] <= picked[-1] - picked[-2]


def test_coarse_pass_small_cases():
    assert coarse_pass([], 3) == []
    assert coarse_pass([5, 6, 7], 0) == []
    assert coarse_pass([5, 6, 7], 10) == [0, 1, 2]
    assert coarse_pass([0, 0, 0, 0, 0], 3) == [0, 2, 4]  # no token counts: spread by index


# ------------------------------------------------------------------------------------------ refinement


def test_interval_need_weights_moves_that_flip_the_mask():
    a = np.array([0.1, 0.45, 0.9, 0.1])
    assert interval_need(a, a) == 0
    assert interval_need(a, np.array([0.9, 0.45, 0.9, 0.1])) == pytest.approx(0.8)
    assert interval_need(a, np.array([0.1, 0.55, 0.9, 0.1])) == pytest.approx(0.1)  # near 0.5: little
    assert interval_need(a, np.array([0.1, 0.45, 0.9, 0.3])) == 0  # moved, under MOVED
    assert interval_need(np.array([0.5]), np.array([1.0])) == pytest.approx(0.5 - MOVED)  # dormant throughout


def test_next_refinements_matches_brute_force_priority():
    """Every interval with a need, ranked by need x sqrt(width), ties to the earlier; its middle available."""
    rng = np.random.default_rng(3)
    n = 40
    rates = rng.random((n, 5))
    for trial in range(20):
        scored = sorted(rng.choice(n, size=8, replace=False).tolist())
        known = {i: rates[i] for i in scored}
        got = next_refinements(list(range(n)), known, 3)
        ranked = []
        for lo, hi in itertools.pairwise(scored):
            need = interval_need(rates[lo], rates[hi])
            if hi - lo > 1 and need > 0:
                middle = min(range(lo + 1, hi), key=lambda i: (abs(i - (lo + hi) / 2), i))
                ranked.append((-need * math.sqrt(hi - lo), lo, middle))
        assert got == [m for _, _, m in sorted(ranked)[:3]], trial


def test_next_refinements_skips_and_resolution():
    rates = truth(20, {0: [7]})
    known = {0: rates[0], 19: rates[19]}
    assert next_refinements(list(range(20)), known, 1) == [9]  # the middle of 0..19 (ties: the earlier)
    assert next_refinements(list(range(20)), known, 1, skip={9}) == [10]
    tokens = [1000 + i for i in range(20)]  # the whole series within 2% of its first tokens
    assert next_refinements(tokens, known, 1, resolution=0.05) == []
    assert next_refinements(tokens, known, 1, resolution=0.001) == [9]
    assert next_refinements(list(range(20)), {i: rates[i] for i in (0, 1)}, 5) == []  # adjacent: located


# ------------------------------------------------------------------------------------------ the whole search


@pytest.mark.parametrize("seed", range(6))
def test_enough_budget_locates_every_change_to_adjacent_checkpoints(seed):
    rng = np.random.default_rng(seed)
    n = 120
    changes = {
        h: sorted(rng.choice(np.arange(1, n), size=int(rng.integers(0, 3)), replace=False).tolist()) for h in range(6)
    }
    # two changes of one head closer than the coarse pass's spacing could hide each other: keep them apart
    changes = {h: [c for i, c in enumerate(at) if i == 0 or c - at[i - 1] > n // 3] for h, at in changes.items()}
    rates = truth(n, changes, seed=seed)
    budget = n // 2
    scored = budgeted_search(list(range(n)), budget, scorer(rates))
    assert len(scored) <= budget
    for at in changes.values():
        for c in at:
            lo, hi = bracket(scored, c)
            assert hi - lo == 1, (c, lo, hi)
    assert next_refinements(list(range(n)), scored, 1) == []  # it stopped because nothing was left


@pytest.mark.parametrize("budget", [2, 3, 5, 11, 30])
def test_never_exceeds_the_budget_and_stored_ones_count(budget):
    rates = truth(60, {0: [5], 1: [17, 40], 2: [33]})
    log: list = []
    scored = budgeted_search(list(range(60)), budget, scorer(rates, log))
    assert len(scored) == min(budget, len(scored)) <= budget
    assert sum(len(x) for x in log) == len(scored)  # nothing scored twice
    stored = {3: rates[3], 50: rates[50], 51: rates[51]}
    log = []
    again = budgeted_search(list(range(60)), budget, scorer(rates, log), rates=stored)
    assert len(again) <= max(budget, 3) and set(stored) <= set(again)
    assert sum(len(x) for x in log) == len(again) - 3


class Killed(Exception):
    pass


def dying_scorer(rates: np.ndarray, stored: dict, after: int):
    """Scores (and 'stores') one checkpoint at a time, as the local runner does, and dies after `after`."""

    def score(indices):
        out = {}
        for i in indices:
            if len(stored) >= after:
                raise Killed
            stored[i] = out[i] = rates[i]
        return out

    return score


@pytest.mark.parametrize("at_once", [1, 3])
def test_deterministic_and_resumable(at_once):
    """A search killed after any number of checkpoints, run again from what it stored (the coarse pass whole, then
    refinements one at a time), ends with the same checkpoints as a whole run. Several at once: the same while
    the kill falls in the coarse pass or between rounds."""
    rates = truth(80, {0: [3], 1: [9, 50], 2: [21], 3: [64], 4: [2, 5]})
    tokens = list(range(80))
    whole_log: list = []
    whole = budgeted_search(tokens, 30, scorer(rates, whole_log), at_once=at_once)
    assert sorted(whole) == sorted(budgeted_search(tokens, 30, scorer(rates), at_once=at_once))
    ends = list(itertools.accumulate(len(b) for b in whole_log))
    for cut in range(1, len(whole)) if at_once == 1 else [c for c in range(1, len(whole)) if c <= ends[0] or c in ends]:
        stored: dict = {}
        with pytest.raises(Killed):
            budgeted_search(tokens, 30, dying_scorer(rates, stored, cut), at_once=at_once)
        resumed = budgeted_search(tokens, 30, scorer(rates), rates=stored, at_once=at_once)
        assert sorted(resumed) == sorted(whole), cut


def test_first_pass_is_the_coarse_pass_less_what_is_stored():
    tokens = [1000 * i for i in range(100)]
    coarse = coarse_pass(tokens, coarse_size(40, 100))
    assert len(coarse) == math.ceil(COARSE_SHARE * 40)
    assert first_pass(tokens, 40, ()) == coarse
    assert first_pass(tokens, 40, (coarse[0], 77)) == coarse[1:]
    assert first_pass(tokens, 3, (5, 6)) == [coarse[0]]  # one left in the budget


def test_failed_checkpoints_are_not_chosen_again():
    rates = truth(40, {0: [11]})
    log: list = []
    scored = budgeted_search(list(range(40)), 20, scorer(rates, log, fail={11, 10}))
    chosen = [i for batch in log for i in batch]
    assert chosen.count(11) <= 1 and chosen.count(10) <= 1 and 11 not in scored and 10 not in scored
    lo, hi = bracket(scored, 11)
    assert (lo, hi) == (9, 12)  # as close as the failures allow


def test_at_once_takes_several_per_round():
    rates = truth(100, {0: [7], 1: [30], 2: [61], 3: [88]})
    log: list = []
    scored = budgeted_search(list(range(100)), 40, scorer(rates, log), at_once=4)
    assert len(log[0]) == coarse_size(40, 100)  # the coarse pass at once
    assert max(len(b) for b in log[1:]) == 4
    for c in (7, 30, 61, 88):
        lo, hi = bracket(scored, c)
        assert hi - lo == 1
