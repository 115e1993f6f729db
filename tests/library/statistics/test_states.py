"""Confident states and the transitions between them (`statistics/states.py`, docs/SCORES.md "Confidence"):
against a brute-force oracle, the two properties the store promises at every checkpoint density, power that
does not fall as checkpoints get denser, and BY beside BH."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from dormant_tasks.statistics import ACTIVE, DORMANT, UNDETERMINED, fdr_qvalues, state_pvalues, state_transitions
from dormant_tasks.tracking.transitions import derive_transitions
from tests.builders.rows import checkpoints_table, ckpt, rows_with_inactive_inputs, table


def p_oracle(k: int, n: int) -> tuple[float, float]:
    """Exact binomial tails by integer sums: P(X >= k), P(X <= k), X ~ Binomial(n, 1/2)."""
    return sum(comb(n, i) for i in range(k, n + 1)) / 2**n, sum(comb(n, i) for i in range(k + 1)) / 2**n


def ancestors(pred: list[int], j: int) -> list[int]:
    out = []
    while pred[j] >= 0:
        j = pred[j]
        out.append(j)
    return out


def oracle(k, n, pred, dormant, fdr, method):
    """Plain Python, one head and one pair at a time: head p-values over every ancestor pair, BH/BY over heads,
    the state level, the states, and the changes between a confident state and its nearest confident ancestor,
    located at the mask change where the summed (rate - 1/2) of the checkpoints before it, on the old side, is
    largest."""
    T, H = k.shape
    pd = [[p_oracle(int(k[t, h]), int(n[t]))[0] for h in range(H)] for t in range(T)]
    pa_ = [[p_oracle(int(k[t, h]), int(n[t]))[1] for h in range(H)] for t in range(T)]
    head_p = []
    for h in range(H):
        best = 1.0
        for j in range(T):
            for i in ancestors(pred, j):
                best = min(best, max(pd[i][h], pa_[j][h]), max(pa_[i][h], pd[j][h]))
        head_p.append(min(1.0, T * best))
    # BH by its definition: the largest r with p_(r) <= r fdr / (H c(H))
    c_h = sum(1 / i for i in range(1, H + 1)) if method == "by" else 1.0
    ranked = sorted(head_p)
    r = max([i + 1 for i in range(H) if ranked[i] <= (i + 1) * fdr / (H * c_h)], default=0)
    level = fdr * max(r, 1) / (H * T * c_h)
    state = [
        [DORMANT if pd[t][h] <= level else ACTIVE if pa_[t][h] <= level else UNDETERMINED for h in range(H)]
        for t in range(T)
    ]
    found = []
    for h in range(H):
        for j in range(T):
            if state[j][h] == UNDETERMINED:
                continue
            prior = next((i for i in ancestors(pred, j) if state[i][h] != UNDETERMINED), None)
            if prior is None or state[prior][h] != -state[j][h]:
                continue
            path = [j] + [a for a in ancestors(pred, j) if a > prior or a == prior]
            path = path[: path.index(prior) + 1][::-1]  # prior ... j
            old = bool(dormant[prior, h])
            sign = 1 if old else -1
            best, best_score = None, None
            for x in range(1, len(path)):
                if bool(dormant[path[x - 1], h]) == old and bool(dormant[path[x], h]) != old:
                    score = sum(sign * (k[path[y], h] / n[path[y]] - 0.5) for y in range(1, x))
                    if best_score is None or score > best_score + 1e-12:
                        best, best_score = path[x], score
            found.append((h, prior, j, best))
    return head_p, r, level, state, sorted(found)


def simulate(rng, T, H, n, pred=None, change_share=0.3):
    """Rates per head: constant (0.1, 0.45, 0.5, 0.55, 0.9) or a ramp 0.2 -> 0.8 (or back) across the series."""
    rate = np.tile(rng.choice([0.1, 0.45, 0.5, 0.55, 0.9], size=H), (T, 1)).astype(float)  # [checkpoint, head]
    ramp = rng.random(H) < change_share
    up = np.linspace(0.2, 0.8, T)
    rate[:, ramp] = np.where(rng.random(int(ramp.sum())) < 0.5, up[:, None], up[::-1, None])
    k = rng.binomial(n, rate)
    pred = np.arange(T) - 1 if pred is None else np.asarray(pred)
    return k, np.full(T, n), pred, k / n >= 0.5, ramp


@pytest.mark.parametrize("method", ["bh", "by"])
@pytest.mark.parametrize("seed", range(4))
def test_state_transitions_match_the_brute_force_oracle(seed, method):
    rng = np.random.default_rng(seed)
    # a chain, and a tree: checkpoint 5 branches off 3 (a stage-2 ingredient after the end of stage 1)
    pred = [-1, 0, 1, 2, 3, 3, 5, 6] if seed % 2 else None
    k, n, pred, dormant, _ = simulate(rng, 8, 12, 24, pred)
    got = state_transitions(k, n, pred, dormant, 0.1, method)
    head_p, r, level, state, found = oracle(k, n, pred.tolist(), dormant, 0.1, method)
    assert got.head_p.tolist() == pytest.approx(head_p, rel=1e-9)
    assert got.n_selected == r and got.level == pytest.approx(level)
    assert got.state.tolist() == state
    assert list(zip(got.head.tolist(), got.start.tolist(), got.end.tolist(), got.at.tolist())) == found


def test_state_pvalues_are_the_exact_binomial_tails():
    k = np.array([0, 5, 12, 20, 24])
    d, a = state_pvalues(k, 24)
    for i, kk in enumerate(k.tolist()):
        assert (d[i], a[i]) == pytest.approx(p_oracle(kk, 24), rel=1e-12)
    assert state_pvalues(np.nan, 24) == (1.0, 1.0)


def test_by_is_bh_times_the_harmonic_sum():
    p = np.array([0.001, 0.01, 0.02, 0.5])
    assert fdr_qvalues(p, "by").tolist() == pytest.approx(
        np.minimum(1, fdr_qvalues(p, "bh") * (1 + 1 / 2 + 1 / 3 + 1 / 4))
    )
    with pytest.raises(ValueError, match="choose one of bh, by"):
        fdr_qvalues(p, "holm")


def check_promises(st) -> None:
    """Every confident transition goes between opposite confident states; every head confidently in one state at
    a checkpoint and confidently in the other at a later one has a confident transition between them."""
    for h, s, e, a in zip(st.head, st.start, st.end, st.at):
        assert st.state[s, h] == -st.state[e, h] != UNDETERMINED
        assert s < a <= e
    T, H = st.state.shape
    for h in range(H):
        sure = [t for t in range(T) if st.state[t, h] != UNDETERMINED]
        for i, j in zip(sure, sure[1:]):  # a chain: consecutive confident checkpoints
            if st.state[i, h] == -st.state[j, h]:
                assert any((st.head == h) & (st.start == i) & (st.end == j))


def test_denser_checkpoints_keep_power_and_the_promises():
    """One series of 65 checkpoints, its heads' rates ramping 0.2 -> 0.8 or constant, tracked at every checkpoint,
    every 4th and every 32nd (3 checkpoints): the ramps found are at least as many when denser."""
    rng = np.random.default_rng(11)
    k, n, _, _, ramp = simulate(rng, 65, 200, 128)
    found = {}
    for every in (32, 4, 1):
        pick = np.arange(0, 65, every)
        sub = k[pick]
        st = state_transitions(sub, n[pick], np.arange(len(pick)) - 1, sub / 128 >= 0.5, 0.05)
        check_promises(st)
        heads = set(st.head.tolist())
        found[every] = (len(heads & set(np.flatnonzero(ramp))), len(heads - set(np.flatnonzero(ramp))))
    assert found[1][0] >= found[4][0] >= found[32][0] > 0.8 * ramp.sum()
    assert all(false == 0 for _, false in found.values())


def test_derived_transitions_keep_the_promises_at_every_density():
    """Through `derive_transitions` on head_scores built by the real aggregation: every checkpoint and every 4th
    of a 24-checkpoint series; each stored confident row ends where its head is confidently in its new state."""
    rng = np.random.default_rng(5)
    n_heads, n_inputs = 8, 64
    ck = [ckpt("m", 1, step) for step in range(1, 25)]
    rate = np.tile(rng.choice([0.15, 0.5, 0.85], n_heads), (24, 1))
    rate[:, :3] = np.linspace(0.1, 0.9, 24)[:, None]  # three heads fall dormant
    rows = []
    for t, c in enumerate(ck):
        inactive = rng.random((n_inputs, n_heads)) < rate[t]
        rows += rows_with_inactive_inputs(
            c, [set(np.flatnonzero(inactive[:, h]).tolist()) for h in range(n_heads)], n_inputs
        )
    for every in (1, 4):
        keep = {c["revision"] for c in ck[::every]}
        tr = derive_transitions(
            table([r for r in rows if r["revision"] in keep]), checkpoints_table(ck[::every], n_inputs)
        )
        rows_by_rev = {r["revision"]: r for r in rows}
        sure = [r for r in tr.to_pylist() if r["confident"]]
        assert {r["head_index"] for r in sure} >= {0, 1, 2}
        for r in sure:
            end = [
                x for x in rows if x["revision"] == r["to_confident_revision"] and x["head_index"] == r["head_index"]
            ][0]
            assert (end["dormant_rate"] > 0.5) == (r["to_state"] == "dormant")
            assert r["state_p"] <= 0.05 and rows_by_rev[r["from_confident_revision"]]["step"] < end["step"]
