"""The findings' statistics (docs/SCORES.md §5 "Confidence" and §7): Benjamini-Hochberg q-values of the paired
tests on a hand-built table and on a store of pure noise, bootstrap intervals of clustered transition rates
against Poisson (and their coverage), and the blip-robust emergence (the input-dependence
noise floor: tests/library/findings/test_dependence.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dormant_tasks.findings.dynamics import Resampling, poisson_interval, rate_estimate, stable_index
from dormant_tasks.statistics.confidence import bh_qvalues
from dormant_tasks.tracking.transitions import apply_fdr, confident_at, derive_transitions
from tests.builders.rows import ckpt, rows_with_inactive_inputs, table

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


def test_derived_q_values_are_those_of_the_whole_family_by_hand():
    """3 heads x 2 intervals = a family of 6 paired tests, 4 of them transitions, on 128 inputs:
    head 0 A->B: inactive on 0-59 then 0-69 (active -> dormant): b = 0, c = 10, p = 2/2^10;
    head 1 A->B: 0-62 then 1-64: b = 1, c = 2, p = 1;  B->C: 1-64 then 1-58 (dormant -> active): p = 2/2^6;
    head 2 B->C: 0-9 then 0-79: p = 2/2^70; head 0 B->C and head 2 A->B do not change (p = 1 in the family).
    Sorted p: 2^-69, 2^-9, 2^-5, 1, 1, 1 -> 6 p / rank: 6 2^-69, 3 2^-9, 2 2^-5 = 0.0625, 1.5, 1.2, 1."""
    a, b, c = ckpt("m", 1, 1), ckpt("m", 1, 2), ckpt("m", 1, 3)
    rows = rows_with_inactive_inputs(a, [set(range(60)), set(range(63)), set(range(10))])
    rows += rows_with_inactive_inputs(b, [set(range(70)), set(range(1, 65)), set(range(10))])
    rows += rows_with_inactive_inputs(c, [set(range(70)), set(range(1, 59)), set(range(80))])
    tr = {(r["head_index"], r["to_step"]): r for r in derive_transitions(table(rows)).to_pylist()}
    assert sorted(tr) == [(0, 2), (1, 2), (1, 3), (2, 3)]
    expected = {(0, 2): 3 * 2**-9, (1, 2): 1.0, (1, 3): 0.0625, (2, 3): 6 * 2**-69}
    for key, q in expected.items():
        assert tr[key]["confident_q"] == pytest.approx(q, rel=1e-12), key
    assert tr[(1, 3)]["confident_p"] == pytest.approx(2**-5)  # raw p < 0.05 ...
    assert tr[(1, 3)]["confident"] is False  # ... but q = 0.0625: not confident under the FDR
    assert [tr[k]["confident"] for k in ((0, 2), (1, 2), (2, 3))] == [True, False, True]
    # at another level, from the stored q-values
    t = derive_transitions(table(rows))
    assert confident_at(t, 0.1).tolist() == [True, False, True, True]  # rows ordered by (checkpoint, head)
    # apply_fdr recomputes the same q from the stored p's with the family's size
    again = apply_fdr(t.drop_columns(["confident_q"]), {("m", "cal", "taus", "ahon_ln"): 6})
    assert again.column("confident_q").to_pylist() == t.column("confident_q").to_pylist()


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


def test_a_store_of_pure_noise_has_few_confident_transitions_under_the_fdr(capsys):
    t = derive_transitions(table(noise_rows(n_heads=64, n_ckpt=30, n_inputs=128, seed=1)))
    p = np.array(t.column("confident_p").to_pylist())
    fdr = np.array(t.column("confident").to_pylist())
    raw = p < 0.05
    with capsys.disabled():
        print(
            f"\npure noise, 64 heads x 29 intervals, 128 inputs: {t.num_rows} transitions; confident under the raw "
            f"rule (p < 0.05) {raw.sum()} ({100 * raw.mean():.1f}%), under BH q < 0.05 {fdr.sum()} "
            f"({100 * fdr.mean():.1f}%)"
        )
    assert t.num_rows > 300  # heads near 0.5 flip often
    assert fdr.mean() <= 0.05
    assert raw.sum() > fdr.sum() and raw.mean() > 0.05  # selecting on a flip inflates the raw rule


# ------------------------------------------------------------------------------------------ rates


def clustered_counts(rng: np.random.Generator, n_heads: int, mean: float) -> np.ndarray:
    """Per head, a clustered count of transitions: a few unstable heads change often (a gamma-distributed
    propensity of shape 0.3, over-dispersed) and every change comes with its undoing (a blip: pairs)."""
    propensity = rng.gamma(0.3, mean / 2 / 0.3, n_heads)  # mean / 2 pairs on average
    return 2 * rng.poisson(propensity)


def test_bootstrap_rate_is_wider_than_poisson_on_clustered_transitions():
    counts = clustered_counts(np.random.default_rng(0), n_heads=256, mean=0.5)
    est = rate_estimate(counts, 10**9, Resampling(resamples=2000))
    low, high = poisson_interval(int(counts.sum()))
    assert est.value == counts.sum()
    assert est.high - est.low > 1.5 * (high - low)
    assert est.method == "bootstrap over heads (2000 resamples, seed 0)"
    same = rate_estimate(counts, 10**9, Resampling(resamples=2000))
    assert (same.low, same.high) == (est.low, est.high)  # seeded


def test_bootstrap_rate_covers_the_true_rate_about_95_percent(capsys):
    """200 simulated series of 256 heads with clustered transitions: how often each interval holds the true rate
    (256 x 0.5 transitions per billion tokens)."""
    rng = np.random.default_rng(7)
    true, hits, poisson_hits = 256 * 0.5, 0, 0
    for s in range(200):
        counts = clustered_counts(rng, 256, 0.5)
        est = rate_estimate(counts, 10**9, Resampling(resamples=1000, seed=s))
        hits += est.low <= true <= est.high
        low, high = poisson_interval(int(counts.sum()))
        poisson_hits += low <= true <= high
    with capsys.disabled():
        print(
            f"\ncoverage of the true rate over 200 series: bootstrap {hits / 2:.1f}%, Poisson {poisson_hits / 2:.1f}%"
        )
    assert 0.90 <= hits / 200 <= 0.985
    assert poisson_hits < hits


# ------------------------------------------------------------------------------------------ emergence


def stable_oracle(d: list[int], stable: float) -> int:
    """Plain Python: the first dormant position from which the head is dormant at >= stable of the rest."""
    if not d[-1]:
        return -1
    return next(p for p in range(len(d)) if d[p] and sum(d[p:]) >= stable * (len(d) - p) - 1e-9)


def test_stable_index_is_robust_to_a_late_blip():
    #              0  1  2  3  4  5  6  7  8  9
    late_blip = [0, 1, 1, 1, 1, 1, 1, 1, 0, 1]  # dormant from 1 on but for one blip at 8
    never = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    flicker = [1, 0, 1, 0, 1, 0, 1, 0, 1, 1]
    d = np.array([late_blip, never, flicker], dtype=bool).T  # [position, head]
    assert stable_index(d, 1.0).tolist() == [9, -1, 8]  # dormant for good: the blip pushes head 0 to the end
    assert stable_index(d).tolist() == [1, -1, 8]  # >= 80% from 1 on: 8 of 9; the flicker never reaches it early


@pytest.mark.parametrize("stable", [0.5, 0.8, 1.0])
def test_stable_index_matches_a_plain_python_oracle(stable):
    d = np.random.default_rng(2).random((12, 200)) < 0.6  # [position, head]
    want = [stable_oracle(d[:, h].astype(int).tolist(), stable) for h in range(200)]
    assert stable_index(d, stable).tolist() == want
