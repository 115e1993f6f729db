"""The series' listing kept in the store (docs/DATA_CONTRACT.md "listed_checkpoints") and what it says: how many
listed checkpoints lie unscored between two scored ones (`Resolution`), which confident transitions are resolved to
adjacent checkpoints in the findings' text, and interval-censored times (`interval_median_estimate`, checked against
a brute-force oracle). A store without the listing says "unknown"."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from dormant_tasks.checkpoints import Flag, Revision
from dormant_tasks.findings.dynamics import series_findings
from dormant_tasks.reporting.texts import findings_lines
from dormant_tasks.statistics import (
    Resampling,
    interval_median_estimate,
    median_bounds,
    median_estimate,
)
from dormant_tasks.store import read_table
from dormant_tasks.tracking import Resolution, listed_checkpoints, record_listing, series_resolution
from dormant_tasks.tracking.plan import SeriesPlan
from flows.cli.status import series_line
from tests.builders.stores import MODEL, write_series

TOKENS = [0, 50_000, 100_000, 200_000, 500_000, 1_000_000]  # the scored checkpoints c: step 10 c


def scored(c: int) -> Revision:
    return Revision(f"stage1-step{c * 10}-tokens{TOKENS[c]}", 1, c * 10, TOKENS[c])


def unscored(step: int) -> Revision:
    return Revision(f"stage1-step{step}-tokens{step * 5_000}", 1, step, step * 5_000)


def plan_of(revisions: list[Revision], **flags) -> SeriesPlan:
    listed = tuple(sorted(revisions, key=lambda r: r.sort_key))
    return SeriesPlan(listed, listed, set_aside=flags)


def picture() -> tuple[np.ndarray, np.ndarray]:
    """6 checkpoints x 1 layer x 4 heads, rates 0 or 1 (every change confident): heads 0 and 1 fall dormant at
    checkpoint 1 for good, head 2 at 5, head 3 wakes at 2."""
    d = np.zeros((6, 1, 4), dtype=bool)
    d[1:, 0, 0] = d[1:, 0, 1] = True
    d[5, 0, 2] = True
    d[:2, 0, 3] = True
    return d, d.astype(float)


def hand_store(tmp_path):
    d, r = picture()
    return write_series(tmp_path / "store", {"ahon_ln": d}, TOKENS, rates={"ahon_ln": r}, n_inputs=128)


def test_the_listing_is_recorded_read_back_in_series_order_and_rewritten_only_when_it_changes(tmp_path):
    root = hand_store(tmp_path)
    assert listed_checkpoints(root, MODEL) is None  # tracked before the listing: unknown
    duplicate = unscored(42)
    revisions = [scored(c) for c in range(6)] + [unscored(5), unscored(41), duplicate]
    flag = Flag("duplicate", f"{duplicate.name}: the weights of another step", scored(4).name)
    assert record_listing(root, MODEL, plan_of(revisions, **{duplicate.name: flag}), "req-1")
    rows = listed_checkpoints(root, MODEL)
    assert [r["step"] for r in rows] == [0, 5, 10, 20, 30, 40, 41, 42, 50]
    assert [r["revision"] for r in rows if not r["available"]] == [duplicate.name]
    assert {r["request_id"] for r in rows} == {"req-1"}
    assert not record_listing(root, MODEL, plan_of(revisions, **{duplicate.name: flag}), "req-2")  # the same
    assert record_listing(root, MODEL, plan_of(revisions[:6]), "req-3")  # the source lists fewer now
    assert [r["step"] for r in read_table(root, "listed_checkpoints", model_id=MODEL).to_pylist()] == [
        0,
        10,
        20,
        30,
        40,
        50,
    ]


def test_unscored_between_counts_available_unscored_checkpoints_on_the_path():
    listing = [
        {"revision": n, "stage": s, "ingredient": i, "available": a}
        for n, s, i, a in [
            ("s1-a", 1, None, True),
            ("s1-b", 1, None, True),
            ("s1-dup", 1, None, False),  # set aside: not a checkpoint a run would score
            ("s1-c", 1, None, True),
            ("s1-d", 1, None, True),
            ("i1-a", 2, 1, True),
            ("i1-b", 2, 1, True),
            ("i2-a", 2, 2, True),
        ]
    ]
    r = Resolution.of(listing, ["s1-a", "s1-c", "i1-b", "i2-a"])
    assert r.unscored_between("s1-a", "s1-c") == 1  # s1-b; the duplicate does not count
    assert r.unscored_between("s1-c", "i1-b") == 2  # s1-d, then i1-a: across the branch point
    assert r.unscored_between("s1-c", "i2-a") == 1  # s1-d: ingredient 2 branches from the end of stage 1
    assert r.unscored_between("i1-b", "i2-a") is None  # not on one path
    assert r.unscored_between("s1-a", "gone") is None  # a revision the listing lacks
    every = Resolution.of(listing, [x["revision"] for x in listing])
    assert every.unscored_between("s1-a", "s1-c") == 0  # resolved to adjacent checkpoints
    assert Resolution.of(None, []).unscored_between("s1-a", "s1-c") is None  # no listing: unknown


def test_findings_say_which_confident_transitions_are_resolved_and_which_are_not(tmp_path):
    root = hand_store(tmp_path)
    before = "\n".join(findings_lines(series_findings(root, MODEL)))
    assert "Resolution of the 4 confident transitions: unknown" in before  # a store without the listing
    record_listing(root, MODEL, plan_of([scored(c) for c in range(6)]))
    full = series_findings(root, MODEL)
    text = "\n".join(findings_lines(full))
    assert "All 4 confident transitions resolved to adjacent checkpoints." in text
    assert full.emergence.n_interval == 0
    assert "listed:" not in series_line(root, MODEL)  # every listed checkpoint scored: status as before
    unknown = re.search(r" Resolution of the 4 confident transitions: unknown \(.*?\)\.", before).group(0)
    assert "the next `dormant track` of the series records it" in unknown
    resolved = " All 4 confident transitions resolved to adjacent checkpoints."
    assert text.replace(resolved, "") == before.replace(unknown, "")  # every checkpoint scored: nothing else changes
    # 3 checkpoints listed between 500K and 1M (head 2's change), 1 between 0 and 50K (heads 0, 1 settle there)
    record_listing(root, MODEL, plan_of([scored(c) for c in range(6)] + [unscored(s) for s in (5, 41, 43, 47)]))
    f = series_findings(root, MODEL)
    text = "\n".join(findings_lines(f))
    res = f.transitions.resolution
    assert (res.n_confident, res.n_resolved, len(res.unresolved)) == (4, 1, 2)
    assert [(u.from_tokens, u.to_tokens, u.unscored, u.n_confident) for u in res.unresolved] == [
        (0, 50_000, 1, 2),
        (500_000, 1_000_000, 3, 1),
    ]
    assert "between 500K and 1M tokens: 3 checkpoints unscored" in text, text
    assert "between 0 and 50K tokens: 1 checkpoint unscored (2 transitions)" in text, text
    assert "Of the 4 confident transitions, 1 resolved to adjacent checkpoints, 3 not" in text
    e = f.emergence
    assert e.n_interval == 2 and e.settled_low.tolist() == [0.0, 0.0]  # both settle in (0, 50K]
    assert e.settled_median.value == 25_000 and "interval-censored" in e.settled_median.method
    assert "2 of these 2 settling times lie between a scored checkpoint" in text
    assert "\n  listed: 10 checkpoints a run may score, 4 not scored" in series_line(root, MODEL)


def oracle_medians(low, high, grid) -> list[float]:
    """Brute force: the (lower) median of every choice of times on `grid` inside the intervals."""
    choices = [[g for g in grid if lo <= g <= hi] for lo, hi in zip(low, high)]
    return [float(np.sort(t)[(len(t) + 1) // 2 - 1]) for t in itertools.product(*choices)]


@pytest.mark.parametrize("seed", range(5))
def test_interval_median_brackets_every_median_of_times_inside_the_intervals(seed):
    rng = np.random.default_rng(seed)
    grid = np.arange(0, 100, 10.0)
    n = 6
    low = rng.choice(grid, n)
    high = np.minimum(low + rng.choice([0, 10, 30], n), grid[-1])
    medians = oracle_medians(low, high, grid)
    assert median_bounds(low, high) == (min(medians), max(medians))
    layer = np.arange(n) // 1  # one head per layer: 6 units
    e = interval_median_estimate(low, high, layer, Resampling(resamples=200), 5, "tokens")
    for times in ([min(c) for c in zip(low)], list(high), [rng.choice([lo, hi]) for lo, hi in zip(low, high)]):
        truth = median_estimate(np.array(times, float), layer, Resampling(resamples=200), 5, "tokens")
        assert e.low <= truth.low and truth.high <= e.high  # the same resamples: it brackets theirs
    assert min(medians) - 1e-9 <= e.value <= max(medians) + 1e-9


def test_interval_median_of_points_is_the_median_estimate_and_censored_ends_stay_not_reached():
    rng = np.random.default_rng(1)
    t = rng.integers(0, 1_000, 40).astype(float)
    layer = np.arange(40) // 8
    res = Resampling(resamples=100)
    assert interval_median_estimate(t, t, layer, res, 3, "tokens") == median_estimate(t, layer, res, 3, "tokens")
    low, high = t.copy(), t.copy()
    low[:5] -= 50
    high[19:] = low[19:] = np.inf  # more than half right-censored: not reached
    e = interval_median_estimate(low, high, layer, res, 3, "tokens")
    assert e.value == np.inf and e.high == np.inf


def test_series_resolution_of_a_store_without_a_listing_is_unknown(tmp_path):
    root = hand_store(tmp_path)
    r = series_resolution(root, MODEL, [scored(c).name for c in range(6)])
    assert not r.known and r.unscored_between(scored(0).name, scored(1).name) is None
    assert not series_resolution(tmp_path / "nothing", MODEL, []).known
