"""`statistics.paired_changes` (statistics/paired.py, docs/SCORES.md "Paired changes"): McNemar's exact test per
head and adjacent pair against scipy's binomial test, the clustered sign-flip test against every sign pattern, its
level where twins flip together, BH over the heads, and a head that moves 0.4 -> 0.6 on the same inputs: a paired
change, never a confident transition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from dormant_tasks.statistics import bh_qvalues, decide_states, paired_changes, pooled_qvalues, sign_flip_p


def test_single_inputs_give_mcnemars_exact_test():
    rng = np.random.default_rng(0)
    x = rng.random((4, 6, 30)) < rng.random((4, 6, 1))  # [checkpoint, head, input]
    got = paired_changes(x, None, np.arange(4) - 1)
    assert got.later.tolist() == [1, 2, 3] and got.earlier.tolist() == [0, 1, 2]
    for i, (a, b) in enumerate(zip(got.later, got.earlier)):
        for h in range(6):
            up = int((x[a, h] & ~x[b, h]).sum())
            down = int((x[b, h] & ~x[a, h]).sum())
            want = stats.binomtest(min(up, down), up + down, 0.5).pvalue if up + down else 1.0
            assert got.p[i, h] == pytest.approx(want, rel=1e-9)
            assert got.net[i, h] == up - down
        np.testing.assert_allclose(got.q[i], bh_qvalues(got.p[i]))
    assert "McNemar" in got.test and got.n_clusters == 30


def test_the_sign_flip_test_is_every_sign_pattern():
    rng = np.random.default_rng(1)
    net = rng.integers(-4, 5, size=(20, 7))  # [test, cluster]
    want = []
    for row in net:
        observed = abs(row.sum())
        sums = [abs(sum(s * v for s, v in zip(signs, row))) for signs in itertools.product((1, -1), repeat=7)]
        want.append(np.mean([t >= observed for t in sums]))
    np.testing.assert_allclose(sign_flip_p(net), want, rtol=1e-12)


def test_twins_that_flip_together_keep_the_level():
    """Under the null (the two checkpoints exchangeable within each pair of twins, which always flip together),
    McNemar on the inputs as independent rejects far too often; the clustered test keeps its level."""
    rng = np.random.default_rng(2)
    heads, twins = 2000, 32
    state = rng.random((heads, twins)) < 0.5  # [head, twin pair]
    flip = rng.random((heads, twins)) < 0.3  # the pair moves, each way equally likely: exchangeable
    before = np.repeat(state, 2, axis=1)
    after = np.repeat(state ^ flip, 2, axis=1)
    x = np.stack([before, after])  # [checkpoint, head, input]
    naive = paired_changes(x, None, np.array([-1, 0]))
    clustered = paired_changes(x, np.arange(2 * twins) // 2, np.array([-1, 0]))
    assert (naive.p <= 0.05).mean() > 0.1
    assert (clustered.p <= 0.05).mean() <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / heads)
    assert "sign-flip" in clustered.test and clustered.n_clusters == twins


def test_a_move_on_the_same_inputs_is_a_paired_change_not_a_confident_transition():
    """512 heads on 128 inputs at 2 checkpoints: 8 heads move 0.4 -> 0.6 on the same inputs (the 26 inputs that
    change all go one way), the rest stay exactly as they were. BH over the heads calls the 8 and nothing else,
    while confident states call none of them (0.4 and 0.6 are not clearly away from one half)."""
    rng = np.random.default_rng(3)
    before = rng.random((512, 128)) < 0.4
    after = before.copy()
    for h in range(8):
        off = np.flatnonzero(~before[h])
        after[h, rng.choice(off, 26, replace=False)] = True
    x = np.stack([before, after])
    got = paired_changes(x, None, np.array([-1, 0]))
    assert got.changed[0].tolist() == [True] * 8 + [False] * 504
    assert got.p[0, :8].max() < 1e-7 and got.heads_changed == 8
    assert decide_states(x, None, np.array([-1, 0])).n_selected == 0


def test_families_function_and_pooled():
    rng = np.random.default_rng(4)
    x = rng.random((5, 8, 20)) < 0.5
    whole = paired_changes(x, None, np.arange(5) - 1, family="function", method="by")
    np.testing.assert_allclose(whole.q, bh_qvalues(whole.p, method="by"))
    other = paired_changes(x[:, :3], None, np.arange(5) - 1)
    a, b = pooled_qvalues([whole.p, other.p])
    both = bh_qvalues(np.concatenate([whole.p.ravel(), other.p.ravel()]))
    np.testing.assert_allclose(np.concatenate([a.ravel(), b.ravel()]), both)
    assert a.shape == whole.p.shape and b.shape == other.p.shape
    with pytest.raises(ValueError, match="family"):
        paired_changes(x, None, np.arange(5) - 1, family="series")
