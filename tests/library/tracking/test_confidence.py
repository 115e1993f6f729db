"""Confidence of a dormancy mask: the Wilson interval of `dormant_rate`, confident transitions and blips
(docs/SCORES.md, "Confidence"), on hand-computed values and hand-built series; the report's counts and
`dormant report --hide-blips` on a hand-built store."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from scipy import stats

from dormant_tasks import store as S
from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting.figure_data import raster_data, states_without_blips, summary_rows
from dormant_tasks.reporting.report import render_report
from dormant_tasks.reporting.series_data import load_series
from dormant_tasks.reporting.sets import calibration_sets
from dormant_tasks.reporting.texts import report_markdown
from dormant_tasks.statistics import checkpoint_rate_interval
from dormant_tasks.statistics.confidence import (
    Z95,
    discordant,
    excludes_half,
    mcnemar_exact_p,
    pack_inputs,
    unpack_inputs,
    wilson_interval,
)
from dormant_tasks.tracking.masks import Tau, aggregate_heads
from dormant_tasks.tracking.series import open_views
from dormant_tasks.tracking.transitions import derive_transitions, mark_blips
from flows.cli import main
from tests.builders.rows import checkpoints_table, ckpt, rows_with_inactive_inputs, score_rows, table
from tests.builders.stores import CAL, MODEL, write_series

Z = 1.959963984540054


def by_hand(k: int, n: int) -> tuple[float, float]:
    """The definition, written out once more in plain floats."""
    p = k / n
    centre = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2)) / (1 + Z**2 / n)
    return centre - half, centre + half


# ------------------------------------------------------------------------------------------ the interval


def test_wilson_on_hand_computed_values():
    assert Z95 == Z
    low, high = wilson_interval(64, 128)
    assert float(low) == pytest.approx(0.41465224626050723, abs=1e-12)
    assert float(high) == pytest.approx(0.5853477537394928, abs=1e-12)
    assert (0.4146 < low < 0.4147) and (0.5853 < high < 0.5854)
    # k = 0 and k = n: the interval touches 0 (or 1); its other end is z²/(n + z²) from it.
    low, high = wilson_interval(0, 128)
    assert float(low) == pytest.approx(0.0, abs=1e-15) and float(high) == pytest.approx(Z**2 / (128 + Z**2))
    low, high = wilson_interval(128, 128)
    assert float(low) == pytest.approx(128 / (128 + Z**2)) and float(high) == pytest.approx(1.0, abs=1e-15)
    # n = 1: one input says little
    low, high = wilson_interval([0, 1], [1, 1])
    np.testing.assert_allclose(low, [0.0, 1 / (1 + Z**2)], atol=1e-15)
    np.testing.assert_allclose(high, [Z**2 / (1 + Z**2), 1.0], atol=1e-15)
    for k, n in [(3, 10), (70, 128), (76, 128), (51, 128), (1, 4)]:
        np.testing.assert_allclose(np.array(wilson_interval(k, n)).ravel(), by_hand(k, n), rtol=1e-12)


def test_wilson_ends_are_exact_at_k_0_and_k_n():
    for n in (1, 3, 7, 128):
        low, high = wilson_interval([0, n], n)
        assert low[0] == 0.0 and high[1] == 1.0  # not 5.6e-17 / 1 - 1e-16: a figure's error bar must not go negative
        assert low[0] <= 0.0 <= high[0] and low[1] <= 1.0 <= high[1]


def test_wilson_is_vectorised_and_n_0_is_unknown():
    k = np.array([[0, 2], [5, 0]])
    n = np.array([[4, 4], [10, 0]])
    low, high = wilson_interval(k, n)
    assert low.shape == high.shape == (2, 2)
    assert np.isnan(low[1, 1]) and np.isnan(high[1, 1])
    np.testing.assert_allclose([low[0, 1], high[0, 1]], by_hand(2, 4))
    np.testing.assert_allclose([low[1, 0], high[1, 0]], by_hand(5, 10))
    low, high = wilson_interval(np.arange(9), 8)  # broadcast n; k = 8 of 8 is the last defined one
    assert low.shape == (9,) and (np.diff(low[:9]) > 0).all() and (np.diff(high[:9]) >= 0).all()
    assert ((0 <= low) & (low <= high) & (high <= 1)).all()
    assert np.isnan(wilson_interval(0, 0)[0]) and np.isnan(wilson_interval(0, 0)[1])
    np.testing.assert_array_equal(excludes_half([0.51, 0.4, 0.2, np.nan], [0.9, 0.6, 0.49, np.nan]), [1, 0, 1, -1])


@pytest.mark.parametrize("k, n", [(0, 5), (1, 5), (3, 7), (64, 128), (70, 128), (127, 128), (128, 128), (9, 20)])
def test_wilson_is_the_set_of_p_that_the_score_test_does_not_reject(k, n):
    """The interval is {p : |k/n - p| <= z sqrt(p (1 - p) / n)}: brute force on a fine grid of p."""
    p = np.linspace(0.0, 1.0, 200_001)
    accepted = p[np.abs(k / n - p) <= Z * np.sqrt(p * (1 - p) / n)]
    low, high = (float(x) for x in wilson_interval(k, n))
    step = p[1] - p[0]
    assert abs(accepted.min() - low) <= step and abs(accepted.max() - high) <= step
    assert np.all(np.diff(accepted) < 1.5 * step)  # one interval, no gaps


def test_wilson_agrees_with_scipy():
    for k, n in [(0, 1), (1, 1), (0, 128), (64, 128), (100, 128), (128, 128), (3, 17)]:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        low, high = wilson_interval(k, n)
        assert float(low) == pytest.approx(ci.low, abs=1e-9) and float(high) == pytest.approx(ci.high, abs=1e-9)


def test_aggregate_writes_the_interval_of_the_rate_nan_inputs_in_the_denominator():
    n = 10
    values = np.ones((n, 1, 1, 3))  # [input, fn, layer, head]; tau "<" 0.5: a value 0 is inactive
    values[:7, 0, 0, 0] = 0.0  # head 0: 7 of 10 inactive
    values[:3, 0, 0, 1] = 0.0  # head 1: 3 of 10 inactive, 4 NaN (never inactive, still counted)
    values[3:7, 0, 0, 1] = np.nan
    t = aggregate_heads(values, ["ahon_ln"], {"ahon_ln": Tau("ahon_ln", 0.5, "<", "fixed")}).to_pydict()
    assert t["dormant_rate"] == [0.7, 0.3, 0.0]
    inactive = np.zeros((3, n), dtype=bool)  # [head, input]: a NaN input is not inactive, and counts in n
    inactive[0, :7] = inactive[1, :3] = True
    for clusters in (None, np.arange(n) // 2):
        t = aggregate_heads(values, ["ahon_ln"], {"ahon_ln": Tau("ahon_ln", 0.5, "<", "fixed")}, clusters=clusters)
        low, high = checkpoint_rate_interval(inactive, clusters)  # the states' rule, with the same clusters
        assert t["dormant_rate_low"].to_pylist() == list(low) and t["dormant_rate_high"].to_pylist() == list(high)
        for h, k in enumerate((7, 3, 0)):  # k/n inside, and never narrower than Wilson's interval of k of n
            wl, wh = by_hand(k, n)
            assert low[h] <= min(k / n, wl) + 1e-12 and high[h] >= max(k / n, wh) - 1e-12
    paired, single = (checkpoint_rate_interval(inactive, c) for c in (np.arange(n) // 2, None))
    assert (paired[0] <= single[0]).all() and (paired[1] >= single[1]).all()  # pairs widen it
    names = S.SCHEMAS["head_scores"].names
    assert names[names.index("dormant") + 1 : names.index("dormant") + 3] == ["dormant_rate_low", "dormant_rate_high"]
    assert S.SCHEMAS["head_scores"].field("dormant_rate_low").nullable


# ------------------------------------------------------------------------------------------ confident


def aggregated_rows(c: dict, inactive_counts: list[int], n: int = 128) -> list[dict]:
    """head_scores rows of one checkpoint through the real `aggregate`: head h inactive on counts[h] of n."""
    values = np.ones((n, 1, 1, len(inactive_counts)))
    for h, k in enumerate(inactive_counts):
        values[:k, 0, 0, h] = 0.0
    heads = aggregate_heads(values, ["ahon_ln"], {"ahon_ln": Tau("ahon_ln", 0.5, "<", "fixed")}).to_pylist()
    common = {k: c[k] for k in ("model_id", "revision", "stage", "step", "tokens")}
    return [common | r | {"calibration_id": "cal", "taus_id": "taus"} for r in heads]


def test_a_head_at_64_of_128_is_undetermined_and_a_transition_goes_across_it():
    """Confident states (exact binomial, Bonferroni over checkpoints, BH over heads): 0/128 and 128/128 are
    confident, 64/128 is not; a confident transition goes from a confident state to the opposite one, across
    undetermined checkpoints, located at the mask change between them."""
    cks = [ckpt("m", 1, s) for s in (1, 2, 3, 4)]
    counts = [  # per checkpoint, per head: inputs (of 128) on which the head is inactive
        [0, 128, 0, 128],
        [64, 0, 128, 64],  # head 0: 64/128, dormant (rate 0.5) but undetermined; head 3 likewise
        [0, 128, 0, 0],
        [128, 128, 0, 64],
    ]
    rows = [r for c, k in zip(cks, counts) for r in aggregated_rows(c, k)]
    tr = derive_transitions(table(rows).drop_columns(["inactive_inputs"]), checkpoints_table(cks, 128)).to_pylist()
    assert all(r["confident_p"] is None for r in tr)  # McNemar needs the indicators; the states do not
    got = {(r["head_index"], r["to_step"]): r["confident"] for r in tr}
    assert got == {
        (0, 2): False,  # 0/128 -> 64/128: into an undetermined state
        (0, 3): False,  # 64/128 -> 0/128: active again, the same confident state as at 1
        (0, 4): True,  # 0/128 -> 128/128
        (1, 2): True,
        (1, 3): True,
        (2, 2): True,
        (2, 3): True,
        (3, 3): True,  # 128/128 at 1 -> 0/128 at 3, across 64/128 at 2: located where the mask changes
        (3, 4): False,  # 0/128 -> 64/128
    }
    sure = {(r["head_index"], r["to_step"]): r for r in tr if r["confident"]}
    assert sure[(3, 3)]["from_confident_revision"] == cks[0]["revision"]
    assert sure[(3, 3)]["to_confident_revision"] == cks[2]["revision"]
    for r in tr:
        assert r["blip"] is False  # derive_transitions alone never marks one


def test_confident_is_null_when_the_inputs_are_unknown():
    """Without the checkpoints' `n_inputs` (no checkpoints table) no state is known: null, not a guess."""
    a, b, c = ckpt("m", 1, 1), ckpt("m", 1, 2), ckpt("m", 1, 3)
    rows = aggregated_rows(a, [0, 0]) + aggregated_rows(b, [128, 0]) + aggregated_rows(c, [0, 128])
    assert derive_transitions(table(rows)).column("confident").null_count == 3
    decided = derive_transitions(table(rows), checkpoints_table([a, b, c], 128)).column("confident")
    assert decided.null_count == 0 and decided.to_pylist() == [True, True, True]


# ------------------------------------------------------------------------------------------ the paired test


def brute_force_p(b: int, c: int) -> float:
    """Two-sided exact p by enumerating every way the n = b + c discordant inputs could have gone under "no
    change" (each way with probability 1/2): the share of outcomes at least as far from n/2 as b."""
    n = b + c
    far = sum(1 for bits in range(2**n) if abs(bin(bits).count("1") - n / 2) >= abs(b - n / 2))
    return far / 2**n


def test_mcnemar_exact_p_on_hand_computed_values():
    assert mcnemar_exact_p(0, 0) == 1.0  # no discordant input: no evidence of change
    assert mcnemar_exact_p(0, 5) == pytest.approx(2 / 32)  # 2 x (1/2)^5
    assert mcnemar_exact_p(5, 0) == pytest.approx(2 / 32)  # symmetric
    assert mcnemar_exact_p(1, 5) == pytest.approx(2 * 7 / 64)  # 2 x (C(6,0) + C(6,1)) / 2^6
    assert mcnemar_exact_p(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact_p(3, 3) == 1.0  # 2 x 42/64 > 1: clipped
    assert mcnemar_exact_p(0, 2000) == 0.0 or mcnemar_exact_p(0, 2000) < 1e-300  # no float overflow at large n
    got = mcnemar_exact_p(np.array([[0, 1], [3, 0]]), np.array([[5, 5], [3, 6]]))
    assert got.shape == (2, 2) and got[0, 0] == pytest.approx(2 / 32) and got[1, 1] == pytest.approx(2 / 64)


def test_mcnemar_exact_p_matches_enumeration_and_scipy():
    for n in range(13):
        for b in range(n + 1):
            c = n - b
            p = float(mcnemar_exact_p(b, c))
            assert p == pytest.approx(brute_force_p(b, c), abs=1e-12), (b, c)
            if n:
                assert p == pytest.approx(stats.binomtest(b, n, 0.5).pvalue, abs=1e-12), (b, c)


def test_packed_indicators_round_trip_and_count_discordant_inputs():
    rng = np.random.default_rng(5)
    for n in (1, 7, 8, 9, 128, 131):
        before, after = rng.random((n, 3)) < 0.5, rng.random((n, 3)) < 0.5  # [input, head]
        pb, pa_ = pack_inputs(before), pack_inputs(after)
        assert all(len(x) == (n + 7) // 8 for x in pb)
        for h in range(3):
            assert (unpack_inputs(pb[h], n) == before[:, h]).all()
            assert discordant(pb[h], pa_[h]) == (
                int((before[:, h] & ~after[:, h]).sum()),
                int((~before[:, h] & after[:, h]).sum()),
            )
    with pytest.raises(ValueError, match="same calibration set"):
        discordant(b"\x01", b"\x01\x00")


def test_each_mask_change_keeps_mcnemars_p_and_confident_is_about_the_states():
    """Hand-made paired indicators on 128 inputs:
    head 0: inactive on inputs 0-59 (60, active), then 0-69 (70, dormant): McNemar b = 0, c = 10, p = 2/2^10
            (the rate on these inputs changed), but neither 60 nor 70 of 128 is a confident state: not confident;
    head 1: 0-62 (63, active), then 1-64 (64, dormant): b = 1, c = 2, p = 1;
    head 2: 0-63 then 64-127: 64 of 128 both times, no state change, no row;
    head 3: 0-9 (confidently active), then 0-99 (confidently dormant): p = 2/2^90, confident.
    Input i is stored as input perm[i] (a fixed permutation): contiguous ranges would make neighbouring inputs
    alike, which the decision, told no clusters, reads as dependent blocks; the paired counts are the same."""
    a, b = ckpt("m", 1, 1), ckpt("m", 1, 2)
    perm = np.random.default_rng(0).permutation(128)
    before = [set(range(60)), set(range(63)), set(range(64)), set(range(10))]
    after = [set(range(70)), set(range(1, 65)), set(range(64, 128)), set(range(100))]
    before, after = ([{int(perm[i]) for i in s} for s in sets] for sets in (before, after))
    rows = rows_with_inactive_inputs(a, before) + rows_with_inactive_inputs(b, after)
    tr = {r["head_index"]: r for r in derive_transitions(table(rows), checkpoints_table([a, b], 128)).to_pylist()}
    assert sorted(tr) == [0, 1, 3]
    assert (tr[0]["confident"], tr[0]["confident_p"]) == (False, pytest.approx(2 / 2**10))
    assert (tr[1]["confident"], tr[1]["confident_p"]) == (False, 1.0)
    assert (tr[3]["confident"], tr[3]["confident_p"]) == (True, pytest.approx(2 / 2**90))
    # the larger of the two states' p: 100 of 128 is z = (36 - 1/2) / sqrt(128 / 4), so far out that the tail over
    # the two checkpoints is Bonferroni's bound, 2 Phi(-z) (statistics/cluster_states.py)
    assert tr[3]["state_p"] == pytest.approx(2 * stats.norm.sf(35.5 / math.sqrt(32)), rel=1e-9)
    assert tr[0]["confident_q"] == tr[0]["confident_q"] and tr[3]["confident_q"] <= 0.05


def test_a_result_without_indicators_has_no_mcnemar_p_and_its_states_still_decide():
    """One checkpoint stored before the indicators were kept (null): no McNemar p into it; its state counts."""
    a, b, c = ckpt("m", 1, 1), ckpt("m", 1, 2), ckpt("m", 1, 3)
    rows = rows_with_inactive_inputs(a, [set(range(120))]) + rows_with_inactive_inputs(b, [set(range(70))])
    old = rows_with_inactive_inputs(c, [set()])
    for r in old:
        r["inactive_inputs"] = None
    tr = derive_transitions(table(rows + old), checkpoints_table([a, b, c], 128)).to_pylist()
    assert [(r["to_step"], r["confident"], r["confident_p"]) for r in tr] == [(3, True, None)]


def test_a_to_b_to_a_is_a_blip_and_a_to_b_to_b_is_not():
    cks = [ckpt("m", 1, s) for s in (10, 20, 30, 40)]
    patterns = {  # head -> dormant at each checkpoint
        (0, 0): [False, True, False, False],  # A B A A: the 10->20 change is undone at 30
        (0, 1): [False, True, True, True],  # A B B B: no blip
        (1, 0): [True, False, True, False],  # B A B A: each change but the last is undone at once
        (1, 1): [False, False, True, True],
    }
    rows = [r for i, c in enumerate(cks) for r in score_rows(c, "ahon_ln", {h: p[i] for h, p in patterns.items()})]
    tr = mark_blips(derive_transitions(table(rows)))
    got = {(r["layer"], r["head_index"], r["to_step"]): r["blip"] for r in tr.to_pylist()}
    assert got == {
        (0, 0, 20): True,
        (0, 0, 30): False,
        (0, 1, 20): False,
        (1, 0, 20): True,
        (1, 0, 30): True,
        (1, 0, 40): False,
        (1, 1, 30): False,
    }
    assert tr.schema == S.SCHEMAS["transitions"]
    names = tr.schema.names
    assert names[names.index("to_state") + 1 : names.index("to_state") + 3] == ["confident", "blip"]


def test_mark_blips_keeps_row_order_is_idempotent_and_needs_the_whole_table():
    cks = [ckpt("m", 1, s) for s in (10, 20, 30)]
    rows = [r for i, c in enumerate(cks) for r in score_rows(c, "awft", {(0, 0): i == 1, (0, 1): i >= 1})]
    tr = derive_transitions(table(rows))
    perm = pa.array([2, 0, 1])
    shuffled = tr.take(perm)
    marked = mark_blips(shuffled)
    assert marked.drop_columns(["blip"]).equals(shuffled.drop_columns(["blip"]))  # same rows, same order
    assert marked.column("blip").to_pylist() == mark_blips(tr).take(perm).column("blip").to_pylist()
    assert mark_blips(marked).equals(marked)
    assert mark_blips(tr).column("blip").to_pylist() == [True, False, False]
    # the first half alone (the series before checkpoint 30 was tracked) has no blip yet
    first_half = tr.filter(pc.equal(tr.column("to_step"), 20))
    assert mark_blips(first_half).column("blip").to_pylist() == [False, False]
    assert mark_blips(S.SCHEMAS["transitions"].empty_table()).num_rows == 0


def test_mark_blips_on_stage2_branches():
    """The end of stage 1 is followed by every ingredient's first checkpoint: a change into it is a blip
    when one branch undoes it; a change into an ingredient is judged on its own branch only."""
    s1 = [ckpt("m", 1, 10), ckpt("m", 1, 20)]
    ing1 = [ckpt("m", 2, 5, 1), ckpt("m", 2, 10, 1)]
    ing2 = [ckpt("m", 2, 5, 2), ckpt("m", 2, 10, 2)]
    order = s1 + ing1 + ing2
    patterns = {
        (0, 0): [False, True, False, False, True, True],  # into s1 20: undone on ingredient 1 only
        (0, 1): [False, False, True, True, True, False],  # into ing1 5: kept; into ing2 5: undone at ing2 10
        (1, 0): [False, True, True, True, True, True],  # into s1 20, kept on every branch
    }
    rows = [r for i, c in enumerate(order) for r in score_rows(c, "ahon_ln", {h: p[i] for h, p in patterns.items()})]
    tr = mark_blips(derive_transitions(table(rows), checkpoints_table(order))).to_pylist()
    got = {(r["layer"], r["head_index"], r["from_revision"], r["to_revision"]): r["blip"] for r in tr}
    rev = [c["revision"] for c in order]
    assert got == {
        (0, 0, rev[0], rev[1]): True,
        (0, 0, rev[1], rev[2]): False,  # ingredient 1's 5 -> 10: no change, nothing undoes it
        (0, 1, rev[1], rev[2]): False,  # ingredient 1 stays dormant (ingredient 2's end is another branch)
        (0, 1, rev[1], rev[4]): True,
        (0, 1, rev[4], rev[5]): False,
        (1, 0, rev[0], rev[1]): False,
    }


@pytest.mark.parametrize("seed", range(4))
def test_mark_blips_matches_a_plain_python_oracle(seed):
    rng = random.Random(seed)
    rows, checkpoints = [], []
    for model in ("org/a", "b"):
        cks = [ckpt(model, 1, s) for s in rng.sample(range(1, 500), rng.randint(2, 9))]
        cks += [ckpt(model, 2, s, ing) for ing in (1, 2) for s in rng.sample(range(1, 50), rng.randint(1, 4))]
        checkpoints += cks
        heads = [(layer, head) for layer in range(2) for head in range(3)]
        for fn in ("ahon_ln", "awft"):
            for c in cks:
                rows += score_rows(c, fn, {h: rng.random() < 0.5 for h in heads})
    tr = mark_blips(derive_transitions(table(rows), checkpoints_table(checkpoints))).to_pylist()
    leaves = {(r["model_id"], r["score_fn"], r["layer"], r["head_index"], r["from_revision"]) for r in tr}
    want = [(r["model_id"], r["score_fn"], r["layer"], r["head_index"], r["to_revision"]) in leaves for r in tr]
    assert [r["blip"] for r in tr] == want
    assert 0 < sum(want) < len(want)


# ------------------------------------------------------------------------------------------ the report


N = 128


def blip_store(tmp_path):
    """6 checkpoints x 1 layer x 4 heads, rates of 128 inputs:
    head 0: A B A A A A (a confident blip), head 1: A B B B B B (confident, no blip),
    head 2: 0/128 thrice, 64/128 (dormant, unsure), then 0/128: a blip, unconfident,
    head 3: 100/128 four times, 60/128 (active, unsure), 100/128: a blip, unconfident."""
    k = np.zeros((6, 1, 4))
    k[1, 0, 0] = N
    k[1:, 0, 1] = N
    k[3, 0, 2] = 64
    k[:, 0, 3] = 100
    k[4, 0, 3] = 60
    rates = k / N
    root = write_series(
        tmp_path / "store", {"ahon_ln": rates >= 0.5}, [0, 10, 20, 30, 40, 50], rates={"ahon_ln": rates}, n_inputs=N
    )
    return root


def test_summary_rows_count_confident_transitions_and_blips(tmp_path):
    series = load_series(blip_store(tmp_path), MODEL)
    (row,) = summary_rows(series)
    assert (row["fell_dormant"], row["woke"]) == (4, 3)  # 7 transitions
    assert (row["confident"], row["blips"]) == (3, 3)
    assert (row["heads_ever_changed"]) == 4
    assert "| 4 | 3 | 3 | 3 | 4 |" in report_markdown(series)


def test_each_calibration_set_counts_its_confident_transitions_and_blips(tmp_path):
    """The report's per-set rows (HTML section and summary.md) count each set's confident transitions and blips
    as the summary counts the primary set's. The second set, "cal-b", 6 checkpoints x 4 heads of 128 inputs:
    head 0: A A B B B B (fell at 2: confident, kept), head 1: B A B B B B (woke at 1: confident blip; fell at 2:
    confident, kept), head 2: 0, 0, 64, 0, 0, 0 (fell at 2, a blip, and woke at 3, kept: neither confident),
    head 3: 100/128 throughout (no change). By hand: fell 3, woke 2, confident 3, blips 2."""
    root = blip_store(tmp_path)  # the primary set: 4 fell, 3 woke, 3 confident, 3 blips
    k = np.zeros((6, 1, 4))
    k[2:, 0, 0] = N
    k[:, 0, 1] = N
    k[1, 0, 1] = 0
    k[2, 0, 2] = 64
    k[:, 0, 3] = 100
    rates = k / N
    write_series(
        root,
        {"ahon_ln": rates >= 0.5},
        [0, 10, 20, 30, 40, 50],
        rates={"ahon_ln": rates},
        n_inputs=N,
        calibration_id="cal-b",
    )
    series = load_series(root, MODEL)
    (primary,) = summary_rows(series)
    sets = calibration_sets(open_views(root, MODEL), series, "ahon_ln")
    counts = {r["calibration_id"]: (r["fell_dormant"], r["woke"], r["confident"], r["blips"]) for r in sets.set_rows}
    assert counts == {CAL: (4, 3, 3, 3), "cal-b": (3, 2, 3, 2)}
    assert counts[CAL] == (primary["fell_dormant"], primary["woke"], primary["confident"], primary["blips"])
    assert [r["final_pct_dormant"] for r in sets.set_rows] == [50.0, 75.0]  # heads 1, 3 / heads 0, 1, 3 at the last

    result = render_report(root, MODEL, out_dir=tmp_path / "report")
    last = "stage1-step50-tokens50"
    assert f"| {CAL} | 6 | {last} | 50.00 | 4 | 3 | 3 | 3 |" in result.markdown
    assert f"| cal-b | 6 | {last} | 75.00 | 3 | 2 | 3 | 2 |" in result.markdown
    html = result.index_html.read_text(encoding="utf-8")
    section = html[html.index("<h2>Calibration sets</h2>") :]
    assert "<th>confident</th><th>blips</th>" in section
    assert (
        "<td>cal-b</td><td>6</td><td>stage1-step50-tokens50</td><td>75.00</td><td>3</td><td>2</td><td>3</td><td>2</td>"
        in section
    )


def test_hide_blips_undoes_them_in_the_raster(tmp_path):
    series = load_series(blip_store(tmp_path), MODEL)
    shown = raster_data(series, "ahon_ln")
    np.testing.assert_array_equal(
        shown.states, [[0, 1, 0, 0, 0, 0], [0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 0, 0], [1, 1, 1, 1, 0, 1]]
    )
    hidden = raster_data(series, "ahon_ln", hide_blips=True)
    np.testing.assert_array_equal(
        hidden.states, [[0, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]]
    )
    assert {(int(h), int(c)): int(hidden.marks[h, c]) for h, c in np.argwhere(hidden.marks)} == {(1, 1): 1}
    assert hidden.row_labels == shown.row_labels and hidden.columns == shown.columns
    # without blips, the marks recomputed from the states are the transitions table's
    series.blips[:] = False
    states, marks = states_without_blips(series, "ahon_ln")
    np.testing.assert_array_equal(states, shown.states)
    np.testing.assert_array_equal(marks, shown.marks)


def test_report_cli_hide_blips_draws_the_undone_raster(tmp_path, monkeypatch):
    root = blip_store(tmp_path)
    drawn = []
    real = fg.draw_raster

    def spy(raster, *args, **kw):
        drawn.append((raster.states.copy(), args[-1] if len(args) > 5 else kw.get("hide_blips", False)))
        return real(raster, *args, **kw)

    monkeypatch.setattr(fg, "draw_raster", spy)
    plain, hidden = tmp_path / "plain", tmp_path / "hidden"
    assert main(["report", "--store", str(root), "--reports-dir", str(plain)]) == 0
    assert main(["report", "--store", str(root), "--reports-dir", str(hidden), "--hide-blips"]) == 0
    (a, a_hide), (b, b_hide) = drawn
    assert not a_hide and b_hide
    assert a[0].tolist() == [0, 1, 0, 0, 0, 0] and b[0].tolist() == [0, 0, 0, 0, 0, 0]
    assert (plain / "summary.md").read_text() == (hidden / "summary.md").read_text()  # everything else as is
