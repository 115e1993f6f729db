"""The findings' statistics (docs/SCORES.md §5 "Confidence" and §7): Benjamini-Hochberg q-values, confident
transitions on a store of pure noise, bootstrap intervals of clustered transition rates against Poisson (and their
coverage) and the blip-robust emergence. Confident states and transitions themselves: test_states.py; the
input-dependence noise floor: tests/library/findings/test_dependence.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dormant_tasks.findings.dynamics import Resampling, poisson_interval, rate_estimate, stable_index
from dormant_tasks.statistics.confidence import bh_qvalues
from dormant_tasks.tracking.transitions import derive_transitions
from tests.builders.rows import checkpoints_table, ckpt, rows_with_inactive_inputs, table

# ------------------------------------------------------------------------------------------ BH q-values


def bh_oracle(p: list[float], m: int) -> list[float]:
    """q_i = the smallest level at which the BH step-up procedure rejects test i (the family's other m - len(p)
    tests at p = 1): at level a, reject the k smallest p's, k the largest with p_(k) <= k a / m. Brute force
    over the candidate levels m p_(j) / j."""
    full = sorted(p + [1.0] * (m - len(p)))
    levels = sorted({min(1.0, m * full[j] / (j + 1)) for j in range(m)})
    out = []
    for x in p:
        for a in levels:
            k = max([j + 1 for j in range(m) if full[j] <= (j + 1) * a / m], default=0)
            if k and x <= full[k - 1]:
                out.append(a)
                break
        else:
            out.append(1.0)
    return out


def test_bh_qvalues_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 -> m p / rank = 0.02, 0.02, 0.04, 0.04; running minimum from the end
    assert bh_qvalues([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.02, 0.04, 0.04, 0.02])
    # a family of 10 tests, 6 of them at p = 1: each q is 10/4 as large
    assert bh_qvalues([0.01, 0.04, 0.03, 0.005], m=10).tolist() == pytest.approx([0.05, 0.1, 0.1, 0.05])
    q = bh_qvalues(np.array([[0.5, np.nan], [0.001, 1.0]]))
    assert np.isnan(q[0, 1]) and q[1, 0] == pytest.approx(0.003) and q[1, 1] == 1.0 and q[0, 0] == 0.75
    with pytest.raises(ValueError, match="cannot hold"):
        bh_qvalues([0.1, 0.2], m=1)


@pytest.mark.parametrize("seed", range(5))
def test_bh_qvalues_match_the_step_up_procedure(seed):
    rng = np.random.default_rng(seed)
    p = np.round(rng.uniform(0, 0.2, 12), 3).tolist()  # ties included
    m = 12 + int(rng.integers(0, 20))
    assert bh_qvalues(p, m).tolist() == pytest.approx(bh_oracle(p, m))


def test_derived_transitions_carry_mcnemar_p_and_the_heads_state_decision():
    """3 heads, 3 checkpoints, 128 inputs. McNemar's exact p of each mask change (its null: the same rate on these
    inputs at both checkpoints): head 0 A->B: inactive on 0-59 then 0-69: b = 0, c = 10, p = 2/2^10.
    Confident states: head 2 goes from 10/128 inactive (confidently active) to 80/128 (p_dormant = P(X >= 80) =
    0.0029 for X ~ Bin(128, 1/2)), head 0 from 60 to 70: neither end is confident at the Bonferroni level."""
    a, b, c = ckpt("m", 1, 1), ckpt("m", 1, 2), ckpt("m", 1, 3)
    # the inputs scattered in a fixed order (no labels are stored: runs of alike neighbours would make blocks)
    at = np.random.default_rng(0).permutation(128)

    def inputs(*ranges):
        return [{int(at[i]) for i in r} for r in ranges]

    rows = rows_with_inactive_inputs(a, inputs(range(60), range(63), range(10)))
    rows += rows_with_inactive_inputs(b, inputs(range(70), range(1, 65), range(10)))
    rows += rows_with_inactive_inputs(c, inputs(range(70), range(1, 59), range(120)))
    ckpts = checkpoints_table([a, b, c], n_inputs=128)
    tr = {(r["head_index"], r["to_step"]): r for r in derive_transitions(table(rows), ckpts).to_pylist()}
    assert sorted(tr) == [(0, 2), (1, 2), (1, 3), (2, 3)]
    assert tr[(0, 2)]["confident_p"] == pytest.approx(2 * 2**-10)
    assert tr[(1, 3)]["confident_p"] == pytest.approx(2**-5)  # raw McNemar p < 0.05: the rate changed ...
    assert tr[(1, 3)]["confident"] is False  # ... but neither state is confident: 64 and 58 of 128
    assert tr[(2, 3)]["confident"] is True  # 10 -> 120 of 128
    assert (tr[(2, 3)]["from_confident_revision"], tr[(2, 3)]["to_confident_revision"]) == (
        b["revision"],
        c["revision"],
    )
    assert [tr[k]["confident"] for k in ((0, 2), (1, 2))] == [False, False]
    assert tr[(0, 2)]["from_confident_revision"] is None and tr[(0, 2)]["state_p"] is None
    # without the checkpoints' inputs nothing is decided: null, not False
    assert derive_transitions(table(rows)).column("confident").null_count == 4


def noise_rows(n_heads: int, n_ckpt: int, n_inputs: int, seed: int) -> list[dict]:
    """Pure noise: each head has a fixed inactive rate near 0.5 (uniform 0.4-0.6) at every checkpoint, and each
    checkpoint draws its per-input indicators anew (independently per input): masks drawn independently per
    checkpoint, no real change of any head."""
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.4, 0.6, n_heads)
    rows = []
    for step in range(1, n_ckpt + 1):
        inactive = rng.random((n_inputs, n_heads)) < rate  # [input, head]
        rows += rows_with_inactive_inputs(
            ckpt("m", 1, step), [set(np.flatnonzero(inactive[:, h]).tolist()) for h in range(n_heads)], n_inputs
        )
    return rows


def test_a_store_of_pure_noise_has_no_confident_transition(capsys):
    rows = noise_rows(n_heads=64, n_ckpt=30, n_inputs=128, seed=1)
    ckpts = checkpoints_table([ckpt("m", 1, step) for step in range(1, 31)], n_inputs=128)
    t = derive_transitions(table(rows), ckpts)
    p = np.array(t.column("confident_p").to_pylist())
    sure = np.array(t.column("confident").to_pylist())
    raw = p < 0.05
    with capsys.disabled():
        print(
            f"\npure noise, 64 heads x 29 intervals, 128 inputs: {t.num_rows} mask changes; McNemar p < 0.05 "
            f"{raw.sum()} ({100 * raw.mean():.1f}%), confident (states, BH over heads) {sure.sum()}"
        )
    assert t.num_rows > 300  # heads near 0.5 flip often
    assert sure.sum() == 0
    assert raw.mean() > 0.05  # selecting on a flip inflates the raw rule


# ------------------------------------------------------------------------------------------ rates


def clustered_counts(rng: np.random.Generator, n_heads: int, mean: float) -> np.ndarray:
    """Per head, a clustered count of transitions: a few unstable heads change often (a gamma-distributed
    propensity of shape 0.3, over-dispersed) and every change comes with its undoing (a blip: pairs)."""
    propensity = rng.gamma(0.3, mean / 2 / 0.3, n_heads)  # mean / 2 pairs on average
    return 2 * rng.poisson(propensity)


def test_bootstrap_rate_is_wider_than_poisson_on_clustered_transitions():
    counts = clustered_counts(np.random.default_rng(0), n_heads=256, mean=0.5)
    layer = np.arange(256) // 16  # 16 layers of 16 heads
    est = rate_estimate(counts, layer, 10**9, Resampling(resamples=2000))
    low, high = poisson_interval(int(counts.sum()))
    assert est.value == counts.sum() and est.n_units == 16
    assert est.high - est.low > 1.5 * (high - low)
    assert (
        est.method
        == "two-stage bootstrap over layers, then heads within them, expanded percentile (2000 resamples, seed 0)"
    )
    same = rate_estimate(counts, layer, 10**9, Resampling(resamples=2000))
    assert (same.low, same.high) == (est.low, est.high)  # seeded


def test_bootstrap_rate_covers_the_true_rate_about_95_percent(capsys):
    """200 simulated series of 256 heads with clustered transitions: how often each interval holds the true rate
    (256 x 0.5 transitions per billion tokens)."""
    rng = np.random.default_rng(7)
    true, hits, poisson_hits = 256 * 0.5, 0, 0
    for s in range(200):
        counts = clustered_counts(rng, 256, 0.5)
        est = rate_estimate(counts, np.arange(256) // 16, 10**9, Resampling(resamples=400, seed=s))
        hits += est.low <= true <= est.high
        low, high = poisson_interval(int(counts.sum()))
        poisson_hits += low <= true <= high
    with capsys.disabled():
        print(
            f"\ncoverage of the true rate over 200 series: bootstrap {hits / 2:.1f}%, Poisson {poisson_hits / 2:.1f}%"
        )
    assert 0.90 <= hits / 200 <= 1.0  # two-stage: conservative without a layer factor
    assert poisson_hits < hits


# ------------------------------------------------------------------------------------------ emergence


def stable_oracle(d: list[int], stable: float, min_run: int = 3) -> int:
    """Plain Python: the first dormant position from which the head is dormant at >= stable of the rest, the rest
    at least min_run positions long; -1 when none."""
    ok = [p for p in range(len(d) - min_run + 1) if d[p] and sum(d[p:]) >= stable * (len(d) - p) - 1e-9]
    return ok[0] if ok else -1


def test_stable_index_is_robust_to_a_late_blip():
    #              0  1  2  3  4  5  6  7  8  9
    late_blip = [0, 1, 1, 1, 1, 1, 1, 1, 0, 1]  # dormant from 1 on but for one blip at 8
    never = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    flicker = [1, 0, 1, 0, 1, 0, 1, 0, 1, 1]
    woke_last = [0, 0, 1, 1, 1, 1, 1, 1, 1, 0]  # a blip at the very end: still settled at 2
    only_last = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1]  # dormant at the last two only: not settled yet (censored)
    d = np.array([late_blip, never, flicker, woke_last, only_last], dtype=bool).T  # [position, head]
    assert stable_index(d, 1.0).tolist() == [-1, -1, -1, -1, -1]  # dormant for good over >= 3: none
    assert stable_index(d).tolist() == [1, -1, -1, 2, -1]  # >= 80% from 1 on: 8 of 9; the flicker never


@pytest.mark.parametrize("stable", [0.5, 0.8, 1.0])
def test_stable_index_matches_a_plain_python_oracle(stable):
    d = np.random.default_rng(2).random((12, 200)) < 0.6  # [position, head]
    want = [stable_oracle(d[:, h].astype(int).tolist(), stable) for h in range(200)]
    assert stable_index(d, stable, 3).tolist() == want


def test_the_censored_median_is_kaplan_meiers_and_not_reached_past_half():
    from dormant_tasks.statistics import median_estimate

    layer = np.arange(10) // 2  # 5 layers of 2 heads
    r = Resampling(resamples=200)
    half = median_estimate(np.array([1.0, 2, 3, 4, 5] + [np.inf] * 5), layer, r, 0, "tokens")
    assert half.value == 5.0 and math.isinf(half.high) and half.n_units == 5  # S(5) = 1/2
    most = median_estimate(np.array([1.0, 2, 3, 4] + [np.inf] * 6), layer, r, 0, "tokens")
    assert math.isinf(most.value)  # not reached


def test_a_censored_median_interval_never_ends_past_the_last_observed_time():
    """Heads settling at random times of a 1e9-token series, some censored (+inf): an interval end is an observed
    time or "not reached", never a time the percentile interpolated between the last one and the censoring."""
    from dormant_tasks.statistics import median_estimate

    rng = np.random.default_rng(0)
    for case in range(300):
        n = int(rng.integers(10, 40))
        values = rng.uniform(0, 1e9, n)
        values[rng.random(n) < rng.uniform(0.2, 0.7)] = np.inf
        layer = np.arange(n) % 5
        e = median_estimate(values, layer, Resampling(resamples=40, seed=case), 0, "tokens")
        last = values[np.isfinite(values)].max(initial=0.0)
        for end in (e.low, e.high):
            assert math.isinf(end) or math.isnan(end) or end <= last, (case, end, last)


# ------------------------------------------------------------------------------------------ intervals over layers


def test_the_expanded_interval_of_a_mean_over_layers_is_students_t():
    """Oracle: with one head per layer the two-stage bootstrap is the plain bootstrap over layers, and its expanded
    percentile interval of the mean is Student's t interval over the layers (mean +- t_{0.975, L-1} s / sqrt(L))."""
    from scipy import stats

    from dormant_tasks.statistics import layered_estimate
    from dormant_tasks.statistics.estimates import expanded_tail

    for n_layers in (8, 16, 40):
        values = np.random.default_rng(n_layers).normal(0, 1, n_layers)
        e = layered_estimate(np.mean, values, np.arange(n_layers), Resampling(resamples=20000), 0, "")
        half = stats.t.ppf(0.975, n_layers - 1) * values.std(ddof=1) / math.sqrt(n_layers)
        # its width is t's; each end moves with the sample's skewness (the percentiles follow it, t does not)
        assert (e.high - e.low) / 2 == pytest.approx(half, rel=0.04)
        assert e.low == pytest.approx(values.mean() - half, abs=0.12 * half)
        assert e.high == pytest.approx(values.mean() + half, abs=0.12 * half)
    # and the plain percentile interval (no units given) is narrower: the undercoverage the expansion mends
    assert expanded_tail(16) == pytest.approx(0.0139, abs=1e-4) and expanded_tail(10**6) == pytest.approx(
        0.025, abs=1e-5
    )


def test_the_layered_interval_covers_the_population_mean_and_share_at_16_layers():
    """16 layers x 16 heads with a layer factor holding 30% of the variance (benchmarks/findings_calibration.py
    section 2): over 200 draws, the intervals hold the population's mean (0) and share above 1 (0.159) at about
    the nominal 95% (the plain percentile interval held 0.89-0.92)."""
    from scipy import stats

    from dormant_tasks.statistics import layered_estimate, share_estimate

    layer = np.repeat(np.arange(16), 16)
    rng = np.random.default_rng(11)
    mean_hits = share_hits = 0
    for rep in range(200):
        values = np.repeat(rng.normal(0, math.sqrt(0.3), 16), 16) + rng.normal(0, math.sqrt(0.7), 256)
        r = Resampling(resamples=400, seed=rep)
        e = layered_estimate(np.mean, values, layer, r, 0, "")
        s = share_estimate(values > 1.0, layer, r, 0)
        mean_hits += e.low <= 0.0 <= e.high
        share_hits += s.low <= stats.norm.sf(1.0) <= s.high
    assert mean_hits / 200 >= 0.92 and share_hits / 200 >= 0.92


def test_the_cluster_bootstrap_draws_whole_layers_then_heads_within_them():
    """Brute-force check of the vectorised draws on unequal layers: each resample is a sequence of blocks, one per
    drawn layer, each block as long as its layer and made of that layer's heads only; as many blocks as layers;
    and over many resamples each layer is drawn 1 time per resample on average and each head within it equally."""
    from dormant_tasks.statistics.estimates import cluster_bootstrap

    layer = np.array([3, 3, 3, 0, 7, 7, 1, 1, 1, 1, 0, 5])  # 5 layers of 1-4 heads, unsorted
    sizes = {g: int((layer == g).sum()) for g in np.unique(layer)}
    draws = cluster_bootstrap(layer, Resampling(resamples=4000, seed=3), 0)
    drawn = {g: 0 for g in sizes}
    for idx in draws:
        pos, blocks = 0, 0
        while pos < idx.size:
            g = layer[idx[pos]]
            block = idx[pos : pos + sizes[g]]
            assert block.size == sizes[g] and (layer[block] == g).all()
            drawn[g] += 1
            pos, blocks = pos + sizes[g], blocks + 1
        assert blocks == len(sizes)
    assert all(abs(n / 4000 - 1) < 0.1 for n in drawn.values())
    heads = np.bincount(np.concatenate(draws), minlength=layer.size)
    for g in sizes:  # within a layer, its heads alike
        own = heads[layer == g]
        assert own.max() - own.min() < 0.15 * own.mean()
    same = cluster_bootstrap(layer, Resampling(resamples=4000, seed=3), 0)
    assert all((a == b).all() for a, b in zip(draws, same, strict=True))  # seeded
