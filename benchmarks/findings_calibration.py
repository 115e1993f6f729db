"""Calibration of the findings' statistics by simulation with known truth: false discovery rate, power and
interval coverage of the methods of this round (NEW) side by side with those they replaced (OLD) and, for power,
an ORACLE that bounds what the data hold.

1. Transitions. H heads tracked at T checkpoints (3, 33, 200: the same trajectories sampled sparse or dense), the
   heads' per-input indicators made from latents with clustered inputs (`Setting`: independent, WinoGrande-like
   twins with icc 0.9, blocks of 8 with icc 0.5) and persistence between checkpoints (0.25, 0.9, 0.99: the same
   inputs at every checkpoint, so with 0.99 an input that is inactive once is inactive almost always), 64, 96
   or 128 inputs (`SETTINGS`). Heads (`trajectories`): 30% hover at 0.495 or 0.505 until t = 0.4 and then move
   away on their own side (nulls at the boundary), 5% step 0.3 <-> 0.7 and 5% 0.4 <-> 0.6 at t = 0.4 (up or
   down), the rest constant at 0.1, 0.45, 0.55 or 0.9.
   NEW: `statistics.decide_states` (cluster-robust confident states, the multiplicity over checkpoints from the
   series' own joint distribution, BH or BY over heads, q <= 0.05). OLD: exact binomial states, Bonferroni over
   the T checkpoints, inputs as independent (`state_transitions`). ORACLE (`oracle_p`): told where the change
   is, the exact sign test of the clusters on each side of it, both sides needed, BH at the same FDR: a valid
   procedure with information NEW lacks, so its power bounds NEW's (about: it tests the clusters' signs, NEW
   their sums).
   A head called to change is false when its true mask (rate >= 0.5) never changes. Measured: FDR per setting
   and T (per replicate false / called, 0 when none), pooled over all; power per move (the share of the moving
   heads called). Targets (NEW): FDR <= 0.06 in every setting, and exactly pooled; power at the largest T not
   below power at T = 3; power for 0.3 <-> 0.7 with 64 persistent (0.99) independent inputs >= 0.8 at the
   largest T (BH), which the ORACLE misses too ("short (bound X)": the verdict passes while NEW is within 2 se
   and BOUND_SLACK of the bound; docs/SCORES.md says why); the 96- and 128-input rows show where it is reached.
2. Intervals over heads. L layers x L heads, value = a_l + e_lh, a_l ~ N(0, s) and e_lh ~ N(0, 1 - s) drawn anew
   each replicate (s = 0.3, the layer effect's share of the variance; s = 0: exchangeable heads). The model's heads
   are one draw of layers and heads from that population, so the true values are the population's: the share of
   heads above 1.0 is P(N(0, 1) > 1) = 0.159, the mean and the median 0. A third design, the skewed layer effect
   (dormant heads concentrated in a few layers): a_l lognormal, shifted and scaled to mean 0 and variance 0.5
   (skewness 6); its true share by quadrature (0.119), its mean 0; only the share and the mean are measured.
   CANDIDATE (no target, not in use): the studentized interval over the same resamples (`studentized`).
   NEW: the two-stage bootstrap over layers with the expanded percentile interval (`share_estimate`,
   `layered_estimate`) and the exact order-statistic interval of the median (`median_order_interval`, which
   assumes exchangeable heads: with a layer factor its row is measured without a target). OLD: the percentile
   bootstrap over heads (`resample_heads` + `bootstrap_interval`). Target (NEW): coverage >= 0.95 (within 2 se;
   short of it a stated shortfall, below 0.85 a failure).
3. Input dependence under a clustered null. One text whose inputs come in clusters of 2-8 (a cluster shares a
   N(0, 1) effect on the logit of each head's inactivity); two disjoint sets drawn cluster-whole from it (~128
   inputs each), so dormancy does not depend on the set. OLD: the input-level permutation test of the noise
   floor (one-sided, set labels permuted input by input; `_old_noise_floor_p`). NEW:
   `findings.dependence.noise_floor` (whole clusters permuted, two-sided). Measured: FPR at 0.05. Target (NEW):
   <= 0.06.
4. Checkpoints chosen by the data: FDR of `decide_states` on checkpoints a budgeted run's refinement picks from the
   observed masks (benchmarks/adaptive_design.py, its rows named ADAPTIVE, FIXED, EXHAUSTIVE). Target: <= 0.06.

Values are printed with their Monte Carlo standard error (+- se); a target is met ("pass") when the value meets it,
"pass (within 2 se)" when it misses by less than two se, "FAIL" otherwise; exit status 1 on a FAIL. `--small` (the
CI guard, tests/benchmarks/test_findings_calibration.py) runs fewer heads, replicates and resamples and T in 3, 33;
the default run the full sizes and writes docs/SCORES.md's table with `--write-docs`. Times on the shared 2-core
machine: in docs/SCORES.md beside the table (the full run) and in the test's budget (--small).

    .venv/bin/python benchmarks/findings_calibration.py [--small] [--seed 0] [--write-docs]
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from dormant_tasks.statistics import (
    Resampling,
    bootstrap_interval,
    decide_states,
    fdr_qvalues,
    layered_estimate,
    median_order_interval,
    resample_heads,
    share_estimate,
    state_transitions,
)
from dormant_tasks.statistics.estimates import cluster_bootstrap, expanded_tail  # noqa: E402

FDR = 0.05
N_INPUTS = 128
LAYER_SHARE = 0.3
THRESHOLD = 1.0


@dataclass(frozen=True)
class Sizes:
    heads: int  # section 1
    reps: int
    checkpoints: tuple[int, ...]
    settings: tuple  # of Setting
    layers: int  # section 2: layers x heads per layer
    interval_reps: int
    resamples: int
    dep_heads: int  # section 3
    dep_reps: int
    permutations: int


@dataclass
class Row:
    section: str
    method: str
    null: str
    measured: str
    value: float
    se: float
    target: str
    passed: bool | None  # None: no target (a reference); else: the value meets it within 2 se
    exact: bool = True  # the value itself meets the target
    short: bool = False  # a target the method falls short of, stated (docs/SCORES.md says why), not a failure
    bound: float | None = None  # short of a target that the oracle misses too: the oracle's value (the bound)

    def cells(self) -> list[str]:
        value = "not available" if math.isnan(self.value) else f"{self.value:.3f} +- {self.se:.3f}"
        verdict = {None: "-", True: "pass" if self.exact else "pass (within 2 se)", False: "FAIL"}[self.passed]
        verdict = "short (stated)" if self.short else verdict
        verdict = f"short (bound {self.bound:.3f})" if self.bound is not None else verdict
        return [self.method, self.null, self.measured, value, self.target, verdict]


def at_most(target: float, v: float, se: float) -> tuple[bool, bool]:
    """(within 2 Monte Carlo se, exactly): does v meet "<= target"?"""
    return v - 2 * se <= target, v <= target


def at_least(target: float, v: float, se: float) -> tuple[bool, bool]:
    return v + 2 * se >= target, v >= target


def mean_se(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else 0.0


# ------------------------------------------------------------------------------------------ 1. transitions


@dataclass(frozen=True)
class Setting:
    """How a head's per-input indicators are made: n inputs in clusters of `cluster` (the latent's intra-cluster
    correlation `icc`), each input's latent correlated `persistence` between any two checkpoints."""

    inputs: int
    cluster: int
    icc: float
    persistence: float

    @property
    def name(self) -> str:
        kind = {1: "independent", 2: f"twins icc {self.icc:g}", 8: f"blocks of 8 icc {self.icc:g}"}[self.cluster]
        return f"{kind}, persistence {self.persistence:g}, {self.inputs} inputs"


SETTINGS = (
    Setting(128, 1, 0.0, 0.25),
    Setting(128, 2, 0.9, 0.9),
    Setting(128, 8, 0.5, 0.9),
    Setting(128, 1, 0.0, 0.99),
    Setting(64, 1, 0.0, 0.9),
    Setting(64, 1, 0.0, 0.99),
    Setting(96, 1, 0.0, 0.99),
    Setting(64, 2, 0.9, 0.99),
    Setting(64, 8, 0.5, 0.99),
)
MOVES = {"0.3->0.7": (0.3, 0.7), "0.4->0.6": (0.4, 0.6)}
CHANGE = 0.4  # where in the series (0 to 1) the moving heads step and the hovering ones start to move away
# where 0.3->0.7 at the largest T must be found in >= 0.8 of the heads: 64 persistent inputs (the target), and 96
# and 128 to show where it is reached
POWER_TARGET = 0.8
POWER_SETTINGS = (Setting(64, 1, 0.0, 0.99), Setting(96, 1, 0.0, 0.99), Setting(128, 1, 0.0, 0.99))


def trajectories(rng: np.random.Generator, heads: int) -> tuple[np.ndarray, object]:
    """(kind [head]: 0 constant, 1 hovering null, 2 moves 0.3->0.7, 3 moves 0.4->0.6; rate(t) -> [head]).

    30% of the heads hover at 0.495 or 0.505 for the first 40% of the series, then move away on their own side
    (to 0.2 or 0.8 by the end): nulls at the boundary. 10% change state by a step at t = 0.4 (half 0.3 <-> 0.7,
    half 0.4 <-> 0.6, up or down). The rest are constant: 0.1, 0.45, 0.55, 0.9."""
    kind = np.zeros(heads, np.int64)
    order = rng.permutation(heads)
    n_hover, n_move = int(0.3 * heads), heads // 10
    kind[order[:n_hover]] = 1
    kind[order[n_hover : n_hover + n_move // 2]] = 2
    kind[order[n_hover + n_move // 2 : n_hover + n_move]] = 3
    base = rng.choice(np.array([0.1, 0.45, 0.55, 0.9]), size=heads)
    up = rng.random(heads) < 0.5

    def rate(t: float) -> np.ndarray:
        r = base.copy()
        away = max(0.0, (t - CHANGE) / (1 - CHANGE))
        r[kind == 1] = np.where(up[kind == 1], 0.505 + 0.295 * away, 0.495 - 0.295 * away)
        for k, (lo, hi) in ((2, MOVES["0.3->0.7"]), (3, MOVES["0.4->0.6"])):
            before, after = (lo, hi) if t < CHANGE else (hi, lo)
            r[kind == k] = np.where(up[kind == k], before, after)
        return r

    return kind, rate


def indicators(rng: np.random.Generator, rates: np.ndarray, setting: Setting) -> tuple[np.ndarray, np.ndarray]:
    """(bool [checkpoint, head, input], int [input] cluster): input i of cluster c is inactive at t when its latent
    sqrt(icc) A_ct + sqrt(1 - icc) B_it is below Phi^-1(rate), each of A, B = sqrt(p) (fixed part) + sqrt(1 - p)
    (fresh at each checkpoint): the same inputs at every checkpoint, the marginal rate exact."""
    n_ckpt, heads = rates.shape
    n, size = setting.inputs, setting.cluster
    clusters = np.arange(n) // size
    p, icc = setting.persistence, setting.icc
    f32 = np.float32

    def persistent(shape) -> np.ndarray:
        fixed = rng.standard_normal(shape, dtype=f32)
        return math.sqrt(p) * fixed[None] + math.sqrt(1 - p) * rng.standard_normal((n_ckpt, *shape), dtype=f32)

    latent = math.sqrt(1 - icc) * persistent((heads, n))
    if icc > 0:
        latent += math.sqrt(icc) * np.repeat(persistent((heads, n // size)), size, axis=-1)
    threshold = stats.norm.ppf(rates).astype(f32)  # [checkpoint, head]
    return latent < threshold[..., None], clusters


def _decision(x: np.ndarray, clusters: np.ndarray):
    """`decide_states` on the indicators, BH; the last one kept, as BY's rows take the same per-head p (neither the
    tail nor the reach depends on the method, only the q-values)."""
    if _decision.last is None or _decision.last[0] is not x:
        _decision.last = (x, decide_states(x, clusters, np.arange(x.shape[0]) - 1, fdr=FDR, method="bh"))
    return _decision.last[1]


_decision.last = None


def new_method(method: str):
    def run(x: np.ndarray, clusters: np.ndarray) -> np.ndarray:
        """[head] bool: heads with a confident transition by `decide_states` (the clusters given)."""
        return fdr_qvalues(_decision(x, clusters).head_p, method) <= FDR

    return run


def old_method(x: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """[head] bool: the previous release's rule, `state_transitions` on the counts (exact binomial states, Bonferroni
    over the T checkpoints, inputs taken as independent)."""
    k = x.sum(axis=2).astype(np.float64)
    n = np.full(x.shape[0], float(x.shape[2]))
    got = state_transitions(k, n, np.arange(x.shape[0]) - 1, k / x.shape[2] >= 0.5, FDR)
    return got.head_q <= FDR


def oracle_p(x: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """[head] p of "changes state" by a valid test that knows where the true change is (between the checkpoints
    before and after t = CHANGE) and so needs no search over checkpoints: on each side, each cluster's deviation
    summed over the side's checkpoints (k - m / 2), and the exact sign test of the clusters (under a rate of one
    half every cluster's sum is symmetric about 0, the clusters independent: its count of positive sums is
    Binomial(nonzero, 1/2)); a change needs both sides (intersection-union: the larger p), Bonferroni over its
    2 directions."""
    side_p = []
    before = np.linspace(0, 1, x.shape[0]) < CHANGE
    _, cl = np.unique(clusters, return_inverse=True)
    for side in (before, ~before):
        k = x[side].sum(axis=0, dtype=np.int64)  # [head, input]
        per = np.zeros((cl.max() + 1, x.shape[1]))
        np.add.at(per, cl, k.T)  # [cluster, head]
        dev = per - (np.bincount(cl) * side.sum() / 2)[:, None]
        up, down = (dev > 0).sum(axis=0), (dev < 0).sum(axis=0)
        side_p.append((stats.binom.sf(up - 1, up + down, 0.5), stats.binom.sf(down - 1, up + down, 0.5)))
    (dormant_before, active_before), (dormant_after, active_after) = side_p
    down = np.maximum(dormant_before, active_after)  # dormant -> active
    up = np.maximum(active_before, dormant_after)
    return np.minimum(1.0, 2 * np.minimum(down, up))


def oracle_method(x: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """[head] bool: BH over the heads at the same FDR of `oracle_p`."""
    return fdr_qvalues(oracle_p(x, clusters), "bh") <= FDR


ORACLE = "ORACLE sign test of clusters, true change point known"
METHODS = {
    "OLD exact binomial states, Bonferroni over T": old_method,
    ORACLE: oracle_method,
    "NEW decide_states bh": new_method("bh"),
    "NEW decide_states by": new_method("by"),
}


def section_transitions(sizes: Sizes, seed: int, methods: dict | None = None) -> list[Row]:
    """FDR (per replicate: false heads / heads called to change, 0 when none) and power (per move: the share of the
    heads that move with a confident change) per setting, method and T. A head is called when it has a confident
    transition; the call is false when its true mask (rate >= 0.5) never changes."""
    methods = METHODS if methods is None else methods
    out: dict[tuple, list[float]] = {}
    for si, setting in enumerate(sizes.settings):
        for rep in range(sizes.reps):
            rng = np.random.default_rng([seed, 1, si, rep])
            kind, rate = trajectories(rng, sizes.heads)
            for t_count in sizes.checkpoints:
                rates = np.stack([rate(t) for t in np.linspace(0, 1, t_count)])  # [checkpoint, head]
                x, clusters = indicators(np.random.default_rng([seed, 3, si, rep, t_count]), rates, setting)
                for name, fn in methods.items():
                    called = fn(x, clusters)
                    false = called & (kind < 2)
                    out.setdefault((si, t_count, name, "fdp"), []).append(false.sum() / max(called.sum(), 1))
                    for k, move in ((2, "0.3->0.7"), (3, "0.4->0.6")):
                        out.setdefault((si, t_count, name, move), []).append(float(called[kind == k].mean()))
    rows = []
    for name in methods:
        new = name.startswith("NEW")
        pooled = []
        for si, setting in enumerate(sizes.settings):
            for t_count in sizes.checkpoints:
                fdp = out[si, t_count, name, "fdp"]
                pooled += fdp
                v, se = mean_se(fdp)
                ok, exact = at_most(0.06, v, se) if new else (None, True)
                target = "<= 0.06" if new else "-"
                rows.append(Row("1", name, setting.name, f"FDR, T={t_count}", v, se, target, ok, exact))
            for move in MOVES:
                low, low_se = mean_se(out[si, min(sizes.checkpoints), name, move])
                for t_count in sizes.checkpoints:
                    v, se = mean_se(out[si, t_count, name, move])
                    target, ok, exact, bound = "-", None, True, None
                    if new and t_count == max(sizes.checkpoints):
                        # within 2 Monte Carlo se: the same heads at both T, but their indicators drawn anew
                        target, exact = f">= T={min(sizes.checkpoints)} ({low:.3f})", v >= low
                        ok = v + 2 * math.hypot(se, low_se) >= low  # 2 se of the difference
                        # the oracle is BH's: BY (any dependence between heads) pays its harmonic sum on top
                        if setting in POWER_SETTINGS and move == "0.3->0.7" and ORACLE in methods and "bh" in name:
                            target = f">= {POWER_TARGET} and {target}"
                            bound = mean_se(out[si, t_count, ORACLE, move])
                            ok, exact = ok and power_verdict(v, se, bound), exact and v >= POWER_TARGET
                    row = Row("1", name, setting.name, f"power {move}, T={t_count}", v, se, target, ok, exact)
                    if bound is not None and ok and not v + 2 * se >= POWER_TARGET:
                        row.bound = bound[0]
                    rows.append(row)
        v, se = mean_se(pooled)
        ok, exact = (v <= 0.06, True) if new else (None, True)  # the guard: exact, over every setting and T
        rows.append(
            Row("1", name, "every setting and T (pooled)", "FDR", v, se, "<= 0.06 (exact)" if new else "-", ok, exact)
        )
    return rows


def power_verdict(v: float, se: float, bound: tuple[float, float]) -> bool:
    """Does the power v (+- se) meet POWER_TARGET, or fall short of it only where the information does? The
    oracle's power (+- se) bounds what a valid procedure that must find the change itself can reach: when the
    bound is below the target too, the method passes ("short (bound X)") unless it is clearly below the bound
    (by more than 2 se of the difference and BOUND_SLACK, the price of not knowing where the change is)."""
    if v + 2 * se >= POWER_TARGET:
        return True
    return bound[0] < POWER_TARGET and v + 2 * math.hypot(se, bound[1]) + BOUND_SLACK >= bound[0]


BOUND_SLACK = 0.1


# ------------------------------------------------------------------------------ 2. intervals over heads

# the skewed layer effect (issue 60: dormant heads concentrated in a few layers): a_l = sqrt(s) (exp(Z) - m) / sd,
# Z ~ N(0, 1), m and sd the lognormal's mean and standard deviation, so a_l has mean 0, variance s and skewness 6
SKEWED = -1.0  # the marker of the skewed design among the layer shares
SKEWED_SHARE = 0.5
_LOGNORMAL = (math.exp(0.5), math.sqrt((math.e - 1) * math.e))


def studentized(values: np.ndarray, layer: np.ndarray, resampling: Resampling, stream: int) -> tuple[float, float]:
    """A candidate for skewed layer effects (issue 60): the studentized (bootstrap-t) interval of a mean over heads,
    over the same two-stage resamples as `layered_estimate` (`cluster_bootstrap`), with the expanded tails
    (`expanded_tail`). Layers of equal size: se = sd(layer means) / sqrt(L), in each resample from its drawn layers;
    t* = (mean* - mean) / se* (+-inf where se* = 0 and the mean moved); the interval [mean - t*_hi se, mean - t*_lo
    se], clipped to the values' range."""
    values = np.asarray(values, dtype=np.float64)
    n_layers = int(np.unique(layer).size)
    size = values.size // n_layers
    mean = float(values.mean())
    se = float(values.reshape(n_layers, size).mean(axis=1).std(ddof=1)) / math.sqrt(n_layers)
    if se == 0:
        return mean, mean
    drawn = np.stack(cluster_bootstrap(layer, resampling, stream))  # [resample, L x size], drawn layer by layer
    means = values[drawn].reshape(len(drawn), n_layers, size).mean(axis=2)  # [resample, drawn layer]
    se_star = means.std(axis=1, ddof=1) / math.sqrt(n_layers)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se_star > 0, (means.mean(axis=1) - mean) / np.where(se_star > 0, se_star, 1.0), 0.0)
        t = np.where((se_star == 0) & (means.mean(axis=1) != mean), np.sign(means.mean(axis=1) - mean) * np.inf, t)
    tail = expanded_tail(n_layers)
    lo_q, hi_q = np.quantile(t, [tail, 1 - tail], method="inverted_cdf")
    low, high = mean - hi_q * se, mean - lo_q * se
    return float(np.clip(low, values.min(), values.max())), float(np.clip(high, values.min(), values.max()))


def skewed_effect(rng: np.random.Generator, n: int) -> np.ndarray:
    m, sd = _LOGNORMAL
    return math.sqrt(SKEWED_SHARE) * (np.exp(rng.standard_normal(n)) - m) / sd


def skewed_share() -> float:
    """P(a + e > THRESHOLD) under the skewed design, by quadrature over Z."""
    from scipy import integrate

    m, sd = _LOGNORMAL
    a = lambda z: math.sqrt(SKEWED_SHARE) * (math.exp(z) - m) / sd  # noqa: E731
    spread = math.sqrt(1 - SKEWED_SHARE)
    return float(
        integrate.quad(lambda z: stats.norm.pdf(z) * stats.norm.sf((THRESHOLD - a(z)) / spread), -10, 10, limit=200)[0]
    )


def section_intervals(sizes: Sizes, seed: int) -> list[Row]:
    rows = []
    resampling = Resampling(resamples=sizes.resamples, seed=seed)
    n_layers = sizes.layers
    layer = np.repeat(np.arange(n_layers), n_layers)
    for share in (LAYER_SHARE, 0.0, SKEWED):
        hits: dict[str, list[float]] = {}
        skewed = share == SKEWED
        true_share = skewed_share() if skewed else float(stats.norm.sf(THRESHOLD))
        for rep in range(sizes.interval_reps):
            rng = np.random.default_rng([seed, 4, rep, 77 if skewed else int(share * 100)])
            effect = skewed_effect(rng, n_layers) if skewed else rng.normal(0, math.sqrt(share), n_layers)
            spread = math.sqrt(1 - (SKEWED_SHARE if skewed else share))
            values = np.repeat(effect, n_layers) + rng.normal(0, spread, layer.size)
            hit = values > THRESHOLD
            idx = resample_heads(layer.size, resampling, rep)  # [resample, head]

            def cover(name: str, low: float, high: float, truth: float, hits=hits) -> None:
                hits.setdefault(name, []).append(float(low <= truth <= high))

            cover("OLD bootstrap heads|share", *bootstrap_interval(hit[idx].mean(axis=1)), true_share)
            s = share_estimate(hit, layer, resampling, rep)
            cover("NEW two-stage layers|share", s.low, s.high, true_share)
            cover(
                "CANDIDATE two-stage layers, studentized|share", *studentized(hit, layer, resampling, rep), true_share
            )
            cover("OLD bootstrap heads|mean", *bootstrap_interval(values[idx].mean(axis=1)), 0.0)
            e = layered_estimate(np.mean, values, layer, resampling, rep, "")
            cover("NEW two-stage layers|mean", e.low, e.high, 0.0)
            cover("CANDIDATE two-stage layers, studentized|mean", *studentized(values, layer, resampling, rep), 0.0)
            if skewed:  # the share and the mean only: the median's truth has no closed form here
                continue
            cover("OLD bootstrap heads|median", *bootstrap_interval(np.median(values[idx], axis=1)), 0.0)
            cover("NEW order statistics|median", *median_order_interval(values), 0.0)
            e = layered_estimate(np.median, values, layer, resampling, rep, "")
            cover("NEW two-stage layers|median", e.low, e.high, 0.0)
        null = f"skewed layer effect (lognormal, share {SKEWED_SHARE:.1f})" if skewed else f"layer share {share:.1f}"
        for key, h in hits.items():
            name, stat = key.split("|")
            v, se = mean_se(h)
            new = name.startswith("NEW")
            if new and stat == "median" and name.startswith("NEW order") and share > 0:
                # its assumption, exchangeable heads, does not hold here: a limitation measured, not a target
                rows.append(Row("2", name, null, "coverage of the median", v, se, "- (assumes exchangeable)", None))
                continue
            # target 0.95, the nominal level (within 2 se); short of it a stated shortfall (docs/SCORES.md), below
            # 0.85 a failure
            if name.startswith("CANDIDATE"):  # not the method in use: measured beside it, no target
                rows.append(Row("2", name, null, f"coverage of the {stat}", v, se, "- (candidate)", None))
                continue
            near, exact = at_least(0.95, v, se)
            ok = (v >= 0.85) if new else None
            short = new and ok and not near
            target = ">= 0.95 (fail < 0.85)" if new else "-"
            rows.append(Row("2", name, null, f"coverage of the {stat}", v, se, target, ok, exact, short=short))
    return rows


# ------------------------------------------------------------------------------ 3. input dependence


def clustered_set(rng: np.random.Generator, logit_rate: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(bool [input, head], int [input] cluster): whole clusters of 2-8 inputs drawn until >= size inputs."""
    xs, labels, total, c = [], [], 0, 0
    while total < size:
        m = int(rng.integers(2, 9))
        effect = rng.standard_normal(logit_rate.size)  # the cluster's effect on each head
        p = 1 / (1 + np.exp(-(logit_rate + effect)))
        xs.append(rng.random((m, logit_rate.size)) < p)
        labels.append(np.full(m, c))
        total, c = total + m, c + 1
    return np.concatenate(xs), np.concatenate(labels)


def _old_noise_floor_p(sets: list[np.ndarray], resampling: Resampling, repeats: int = 10) -> float:
    """main's noise floor p before this round (findings/dependence.py at c6cabbc), its p-value only: each set
    split `repeats` times into random halves of h inputs; within: Jaccard of a set's halves, across: of halves
    of two sets; p one-sided of "across below within", the pooled inputs' set labels permuted input by input."""
    h = min(x.shape[0] for x in sets) // 2
    sizes = [x.shape[0] for x in sets]
    pooled = np.concatenate(sets)
    starts = np.concatenate([[0], np.cumsum(sizes)])

    def counts(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        halves = []
        for k in range(len(sets)):
            own = np.tile(labels[starts[k] : starts[k + 1]], (repeats, 1))
            pick = rng.permuted(own, axis=1)[:, : 2 * h].reshape(repeats, 2, h)
            halves.append(pooled[pick].sum(axis=2) >= h / 2)
        out = np.zeros(4)
        for m in halves:
            out[0] += (m[:, 0] & m[:, 1]).sum()
            out[1] += (m[:, 0] | m[:, 1]).sum()
        for a in range(len(sets)):
            for b in range(a + 1, len(sets)):
                out[2] += (halves[a] & halves[b]).sum()
                out[3] += (halves[a] | halves[b]).sum()
        return out

    def diff(c: np.ndarray) -> float:
        with np.errstate(invalid="ignore", divide="ignore"):
            return c[2] / c[3] - c[0] / c[1]

    observed = diff(counts(np.arange(pooled.shape[0]), resampling.rng(30)))
    rng = resampling.rng(32)
    null = np.array([diff(counts(rng.permutation(pooled.shape[0]), rng)) for _ in range(resampling.permutations)])
    valid = null[~np.isnan(null)]
    return float((1 + (valid <= observed).sum()) / (1 + valid.size))


def new_dependence():
    """The NEW clustered noise floor, or None where the installed `noise_floor` takes no clusters."""
    from dormant_tasks.findings import dependence

    fn = getattr(dependence, "noise_floor", None)
    return fn if fn is not None and "clusters" in inspect.signature(fn).parameters else None


def section_dependence(sizes: Sizes, seed: int) -> list[Row]:
    new = new_dependence()
    old_rej, new_rej = [], []
    for rep in range(sizes.dep_reps):
        rng = np.random.default_rng([seed, 5, rep])
        # base rates spread around 0.5, so that masks are neither empty nor full
        logit_rate = rng.normal(0, 1.5, sizes.dep_heads)
        (xa, ca), (xb, cb) = (clustered_set(rng, logit_rate, N_INPUTS) for _ in range(2))
        run = Resampling(resamples=1, permutations=sizes.permutations, seed=seed * 1000 + rep)
        old_rej.append(float(_old_noise_floor_p([xa, xb], run) < 0.05))
        if new is not None:
            new_rej.append(float(new([xa, xb], [ca, cb], ["text a", "text b"], run).p_value < 0.05))
    null = "clusters of 2-8, one text"
    v, se = mean_se(old_rej)
    rows = [Row("3", "OLD input permutation (one-sided)", null, "FPR at 0.05", v, se, "-", None)]
    if new is None:
        rows.append(
            Row("3", "NEW cluster permutation (noise_floor)", null, "FPR at 0.05", math.nan, 0.0, "<= 0.06", None)
        )
    else:
        v, se = mean_se(new_rej)
        ok, exact = at_most(0.06, v, se)
        rows.append(Row("3", "NEW cluster permutation (noise_floor)", null, "FPR at 0.05", v, se, "<= 0.06", ok, exact))
    return rows


# ------------------------------------------------------------------------------------------------- main

SMALL = Sizes(128, 3, (3, 33), SETTINGS, 16, 100, 200, 128, 100, 200)
FULL = Sizes(512, 6, (3, 33, 200), SETTINGS, 16, 400, 400, 256, 200, 400)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "SCORES.md"
RESULT = Path(__file__).with_suffix(".json")  # the full run the docs' table was written from
MARKED = re.compile(r"(<!-- calibration:table -->\n)(?P<body>.*?)(<!-- /calibration:table -->)", re.S)


def fingerprint(sizes: Sizes) -> str:
    """What a full run's numbers depend on: the sizes, the settings and the methods' names (a change of any: run
    the full benchmark again with --write-docs)."""
    text = repr((sizes, sorted(METHODS), MOVES, FDR))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def docs_passage(result: dict) -> str:
    """The docs' marked passage: each section's table of a full run, with its seed, sizes and time."""
    run = result.get("run", "full").capitalize()
    parts = [f"{run} run (seed {result['seed']}, {result['seconds']:.0f} s on 2 shared cores; {result['sizes']}):\n"]
    for title, body in result["sections"]:
        parts.append(f"{title}\n\n{body}\n")
    return "\n".join(parts)


def write_docs(result: dict) -> None:
    RESULT.write_text(json.dumps(result, indent=1) + "\n")
    text = DOCS.read_text()
    if not MARKED.search(text):
        raise SystemExit(f"{DOCS}: no <!-- calibration:table --> passage to rewrite")
    DOCS.write_text(MARKED.sub(lambda m: m.group(1) + docs_passage(result) + m.group(3), text))


TITLES = {
    "1": "1. Transitions: confident changes of state (FDR, power; clusters, persistence, boundary nulls)",
    "2": "2. Intervals over heads with a layer factor (coverage of the population value)",
    "3": "3. Input dependence under a clustered null (false-positive rate)",
    "4": "4. Checkpoints chosen by the data (`track --budget`): FDR under the adaptive design",
}


def section_adaptive(sizes: Sizes, seed: int) -> list[Row]:
    """Section 4 lives in benchmarks/adaptive_design.py (beside this script: its folder is on sys.path)."""
    from adaptive_design import section_adaptive as adaptive

    return adaptive(sizes, seed)


def table(rows: list[Row]) -> str:
    head = ["method", "null / scenario", "measured", "value", "target", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def timing(seed: int) -> int:
    """Wall and CPU seconds of `decide_states` on 1,024 heads x 200 checkpoints x 128 inputs, the heads of section
    1's mix, independent inputs and twins (icc 0.9), persistence 0.9."""
    for setting in (Setting(128, 1, 0.0, 0.9), Setting(128, 2, 0.9, 0.9)):
        rng = np.random.default_rng([seed, 7])
        _, rate = trajectories(rng, 1024)
        rates = np.stack([rate(t) for t in np.linspace(0, 1, 200)])
        x, clusters = indicators(rng, rates, setting)
        wall, cpu = time.perf_counter(), time.process_time()
        d = decide_states(x, clusters, np.arange(200) - 1)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{setting.name}: {wall:.1f} s wall, {cpu:.1f} s CPU (all threads); {d.n_selected} heads called")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="CI sizes (< 100 s)")
    parser.add_argument("--seed", type=int, default=0, help="of every simulation and resampling")
    parser.add_argument(
        "--write-docs", action="store_true", help="rewrite docs/SCORES.md's table and the saved result from this run"
    )
    parser.add_argument(
        "--timing", action="store_true", help="only time decide_states on 1,024 heads x 200 checkpoints x 128 inputs"
    )
    args = parser.parse_args(argv)
    if args.timing:
        return timing(args.seed)
    sizes = SMALL if args.small else FULL
    print(f"# Findings calibration ({'small' if args.small else 'full'}, seed {args.seed})\n")
    described = (
        f"transitions {sizes.heads} heads, T in {', '.join(map(str, sizes.checkpoints))}, {sizes.reps} replicates of "
        f"each of {len(sizes.settings)} settings; intervals {sizes.layers} layers x {sizes.layers} "
        f"heads, {sizes.interval_reps} replicates, {sizes.resamples} resamples; dependence {sizes.dep_heads} heads, "
        f"2 sets of ~{N_INPUTS} inputs, {sizes.dep_reps} replicates, {sizes.permutations} permutations"
    )
    print(f"sizes: {described}\n")
    failed = False
    total = time.perf_counter()
    sections = []
    for key, section in (
        ("1", section_transitions),
        ("2", section_intervals),
        ("3", section_dependence),
        ("4", section_adaptive),
    ):
        start = time.perf_counter()
        rows = section(sizes, args.seed)
        sections.append((f"**{TITLES[key]}**", table(rows)))
        print(f"## {TITLES[key]}\n\n{table(rows)}\n\n({time.perf_counter() - start:.1f} s)\n")
        failed |= any(r.passed is False for r in rows)
        if any(math.isnan(r.value) for r in rows):
            print("NEW input dependence not available: the installed noise_floor takes no clusters\n")
    seconds = time.perf_counter() - total
    print(f"total {seconds:.1f} s: {'some target FAILED' if failed else 'every target met'}")
    if args.write_docs:
        run = "small" if args.small else "full"
        write_docs(
            {
                "run": run,
                "seed": args.seed,
                "seconds": seconds,
                "sizes": described,
                "fingerprint": fingerprint(sizes),
                "sections": sections,
            }
        )
        print(f"wrote {DOCS} and {RESULT}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
