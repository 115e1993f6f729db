"""Seeds as the unit of replication: the findings of a group of series that differ only in their training seed
(PolyPythias' extra seeds of Pythia 14M-410M on the Hub; `dormant pretrain-tiny --seed N` locally), each headline
number with an interval over the seeds beside each seed's own interval over heads (docs/SCORES.md §7, "Seeds").

A series' interval over heads says how a number varies over heads like these of one trained model; the interval
over seeds says how it varies over training runs of the same recipe, which is what a claim about the recipe
needs. Over seeds: the mean with Student's t interval (seeds are independent replicates of one recipe; the
t interval assumes their values roughly normal), and with fewer than MIN_UNITS seeds the mean and the range
without an interval. Two groups (two recipes) compare by the difference of their means with Welch's t interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from dormant_tasks.errors import ConfigError
from dormant_tasks.findings.dynamics import Findings
from dormant_tasks.findings.table import QUANTITIES, quantity
from dormant_tasks.statistics import MIN_UNITS, Estimate, Share

T_SEEDS = "Student's t interval over seeds (independent training runs of one recipe)"
WELCH = "Welch's t interval of the difference of two groups' means over seeds"


@dataclass(frozen=True)
class Replicated:
    """One headline number over a group of seeds."""

    name: str
    unit: str
    per_seed: list[Estimate | Share | None]  # [seed] each series' own number with its interval over heads
    over_seeds: Estimate  # the mean over the seeds with its t interval (none with fewer than MIN_UNITS seeds)
    spread: tuple[float, float]  # the smallest and largest seed's value
    missing: tuple[tuple[str, str], ...] = ()  # (series, why) of each seed without a value: left out of the mean

    @property
    def n_missing(self) -> int:
        return len(self.missing)


@dataclass(frozen=True)
class ReplicatedFindings:
    model_ids: list[str]  # the group, one series per seed
    score_fn: str
    calibration_id: str
    n_checkpoints: int
    numbers: list[Replicated]
    per_seed: list[Findings]


def _value(x) -> float:
    return float("nan") if x is None else float(x.value) if not isinstance(x, int | float) else float(x)


# (quantity id, unit): the numbers a paper's table reports per recipe, named by their label (`findings/table.py`);
# the settled heads as a share of the heads
HEADLINE = (
    ("emergence.pct_dormant_last", "% of heads"),
    ("emergence.n_settled", "fraction of heads"),
    ("emergence.settled_fraction", "fraction of the series' tokens"),
    ("emergence.early", "fraction of settled heads"),
    ("transitions.ever_changed", "fraction of heads"),
    ("transitions.confidently_changed", "fraction of heads"),
    ("transitions.n_confident", "count"),
    ("input_dependence.noise_floor.difference", "Jaccard"),
)


def _headline(f: Findings, id: str):
    if id == "emergence.n_settled":
        return Share(f.emergence.n_settled, f.emergence.n_heads, math.nan, math.nan, "count")
    return quantity(f, id)


def missing_reason(x) -> str:
    """Why a seed has no value for a headline number (`_value` NaN), in a few words."""
    if x is None:
        return "not measured on this series"
    if isinstance(x, Share) and x.n == 0:
        return "0 of 0: no heads to count"
    return "undefined on this series"


def over_seeds(values: np.ndarray, unit: str) -> Estimate:
    """The mean of per-seed values (NaN ones left out) with Student's t 95% interval; fewer than MIN_UNITS seeds:
    the mean alone."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if not v.size:
        return Estimate.undefined(T_SEEDS, unit, 0)
    mean = float(v.mean())
    if v.size < MIN_UNITS:
        return Estimate(mean, math.nan, math.nan, T_SEEDS, unit, int(v.size))
    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Estimate(mean, mean - half, mean + half, T_SEEDS, unit, int(v.size))


def seed_group_findings(findings: list[Findings]) -> ReplicatedFindings:
    """The headline numbers of a seed group from each series' findings (`series_findings` of each). ConfigError when
    the series are not one recipe at the same checkpoints: another function, calibration set or checkpoint count."""
    if len(findings) < 2:
        raise ConfigError("--seed-group: a group of seeds needs two series or more; name each with a comma between")
    ids = [f.model_id for f in findings]
    twice = sorted({m for m in ids if ids.count(m) > 1})
    if twice:
        raise ConfigError(f"--seed-group: {', '.join(twice)} is given twice; a group has one series per seed")
    first = findings[0]
    for f in findings[1:]:
        for what, a, b in (
            ("score function", first.score_fn, f.score_fn),
            ("calibration set", first.calibration_id, f.calibration_id),
            ("checkpoint count", first.n_checkpoints, f.n_checkpoints),
            ("tau", first.tau, f.tau),
        ):
            if a != b:
                raise ConfigError(
                    f"--seed-group: {first.model_id} and {f.model_id} differ in their {what} ({a} vs {b}); a seed "
                    "group is one recipe tracked alike: track every seed on the same checkpoints and sets"
                )
    numbers = []
    for id, unit in HEADLINE:
        per = [_headline(f, id) for f in findings]
        values = np.array([_value(x) for x in per])
        known = values[~np.isnan(values)]
        spread = (float(known.min()), float(known.max())) if known.size else (math.nan, math.nan)
        missing = tuple((f.model_id, missing_reason(x)) for f, x, v in zip(findings, per, values) if np.isnan(v))
        numbers.append(Replicated(QUANTITIES[id], unit, per, over_seeds(values, unit), spread, missing))
    return ReplicatedFindings(
        [f.model_id for f in findings], first.score_fn, first.calibration_id, first.n_checkpoints, numbers, findings
    )


@dataclass(frozen=True)
class GroupDifference:
    name: str
    unit: str
    a: Estimate  # group a's mean over its seeds
    b: Estimate
    difference: Estimate  # b - a, Welch's t interval (none when either group has fewer than MIN_UNITS seeds)


def compare_seed_groups(a: ReplicatedFindings, b: ReplicatedFindings) -> list[GroupDifference]:
    """Per headline number, recipe b minus recipe a over their seeds (Welch's t interval, Welch-Satterthwaite
    degrees of freedom)."""
    out = []
    for x, y in zip(a.numbers, b.numbers):
        va = np.array([_value(v) for v in x.per_seed])
        vb = np.array([_value(v) for v in y.per_seed])
        va, vb = va[~np.isnan(va)], vb[~np.isnan(vb)]
        if not va.size or not vb.size:
            diff = Estimate.undefined(WELCH, x.unit, 0)
        elif min(va.size, vb.size) < MIN_UNITS:
            diff = Estimate(float(vb.mean() - va.mean()), math.nan, math.nan, WELCH, x.unit, int(min(va.size, vb.size)))
        else:
            sa, sb = va.var(ddof=1) / va.size, vb.var(ddof=1) / vb.size
            se = math.sqrt(sa + sb)
            df = (sa + sb) ** 2 / (sa**2 / (va.size - 1) + sb**2 / (vb.size - 1)) if se > 0 else va.size + vb.size - 2
            half = float(stats.t.ppf(0.975, df) * se)
            d = float(vb.mean() - va.mean())
            diff = Estimate(d, d - half, d + half, WELCH, x.unit, int(min(va.size, vb.size)))
        out.append(GroupDifference(x.name, x.unit, x.over_seeds, y.over_seeds, diff))
    return out
