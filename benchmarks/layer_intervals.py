"""Candidate intervals over layers for skewed layer effects (issue 60, item 7), side by side with the one in use.

The designs of benchmarks/findings_calibration.py's section 2: 16 layers x 16 heads, value = a_l + e_lh with a_l
normal holding 30% of the variance, or none (exchangeable heads), or skewed (lognormal, shifted and scaled to mean
0 and variance 0.5: skewness 6, dormant heads concentrated in a few layers). Measured: the coverage of the mean (truth
0) and of the share of heads above 1.0 (truth by quadrature), each with its Monte Carlo se, over the same two-stage
resamples (`statistics.cluster_bootstrap`: layers, then heads within them) for every method:

- IN USE: the expanded percentile interval (`layered_estimate`, `share_estimate`; `expanded_tail`);
- t: Student's t over the layer means (no resampling);
- STUDENTIZED: the bootstrap-t, t* = (mean* - mean) / se*, se from the drawn layers' means, at the expanded tails;
- HALL: Hall's (1992) transformation of the studentized statistic, which removes its skewness to second order,
  g(t) = t + b t^2 + b^2 t^3 / 3 + gamma / (6 sqrt(L)), b = gamma / (3 sqrt(L)), gamma the layer means' skewness;
  its bootstrap distribution (each resample with its own gamma*) at the expanded tails, inverted through g^-1.
Target: 0.95 +- 0.02 in every design (a method for skewed layers must not lose the others).

    .venv/bin/python benchmarks/layer_intervals.py [--reps 400] [--resamples 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from findings_calibration import LAYER_SHARE, SKEWED_SHARE, THRESHOLD, skewed_effect, skewed_share  # noqa: E402

from dormant_tasks.statistics import Resampling  # noqa: E402
from dormant_tasks.statistics.estimates import cluster_bootstrap, expanded_tail  # noqa: E402

LAYERS = 16
METHODS = ("IN USE expanded percentile", "t over layer means", "STUDENTIZED bootstrap-t", "HALL bootstrap-t")


def hall(t, gamma, n: int):
    b, c = gamma / (3 * math.sqrt(n)), gamma / (6 * math.sqrt(n))
    return t + b * t**2 + b**2 * t**3 / 3 + c


def hall_inverse(x: float, gamma: float, n: int) -> float:
    b, c = gamma / (3 * math.sqrt(n)), gamma / (6 * math.sqrt(n))
    return x - c if abs(b) < 1e-12 else float((np.cbrt(1 + 3 * b * (x - c)) - 1) / b)


def intervals(values: np.ndarray, drawn: np.ndarray) -> dict[str, tuple[float, float]]:
    """values [layer, head]; drawn [resample, layer x head] indices into values.ravel() (layer by layer)."""
    n, size = values.shape
    means = values.mean(axis=1)  # [layer]
    x, se = float(means.mean()), float(means.std(ddof=1)) / math.sqrt(n)
    star = values.ravel()[drawn].reshape(len(drawn), n, size).mean(axis=2)  # [resample, drawn layer]
    x_star, se_star = star.mean(axis=1), star.std(axis=1, ddof=1) / math.sqrt(n)
    tail = expanded_tail(n)
    out = {METHODS[0]: tuple(np.quantile(x_star, [tail, 1 - tail]))}
    q = stats.t.ppf(0.975, n - 1)
    out[METHODS[1]] = (x - q * se, x + q * se)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se_star > 0, (x_star - x) / np.where(se_star > 0, se_star, 1.0), 0.0)
        gamma_star = np.nan_to_num(stats.skew(star, axis=1, bias=False))
    lo, hi = np.quantile(t, [tail, 1 - tail])
    out[METHODS[2]] = (x - hi * se, x - lo * se)
    gamma = float(np.nan_to_num(stats.skew(means, bias=False))) if se > 0 else 0.0
    lo, hi = np.quantile(hall(t, gamma_star, n), [tail, 1 - tail])
    out[METHODS[3]] = (x - hall_inverse(hi, gamma, n) * se, x - hall_inverse(lo, gamma, n) * se)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    resampling = Resampling(resamples=args.resamples, seed=args.seed)
    layer = np.repeat(np.arange(LAYERS), LAYERS)
    print(
        f"coverage of 95% intervals, {LAYERS} layers x {LAYERS} heads, {args.reps} replicates, {args.resamples} "
        f"resamples, seed {args.seed} (target 0.95 +- 0.02)"
    )
    print(f"| method | design | mean | share of heads above {THRESHOLD:g} |\n|---|---|---|---|")
    for design in (f"layer share {LAYER_SHARE:g}", "layer share 0", f"skewed (lognormal, share {SKEWED_SHARE:g})"):
        skewed = design.startswith("skewed")
        share = 0.0 if design == "layer share 0" else LAYER_SHARE
        truth = skewed_share() if skewed else float(stats.norm.sf(THRESHOLD))
        hits: dict[tuple[str, str], list[bool]] = {}
        for rep in range(args.reps):
            rng = np.random.default_rng([args.seed, 60, rep, 77 if skewed else int(share * 100)])
            effect = skewed_effect(rng, LAYERS) if skewed else rng.normal(0, math.sqrt(share), LAYERS)
            spread = math.sqrt(1 - (SKEWED_SHARE if skewed else share))
            values = (effect[:, None] + rng.normal(0, spread, (LAYERS, LAYERS))).ravel()
            drawn = np.stack(cluster_bootstrap(layer, resampling, rep))  # [resample, L x heads] layer by layer
            for stat, v, true in (("mean", values, 0.0), ("share", (values > THRESHOLD).astype(float), truth)):
                for name, (lo, hi) in intervals(v.reshape(LAYERS, LAYERS), drawn).items():
                    hits.setdefault((name, stat), []).append(lo <= true <= hi)
        for name in METHODS:
            cells = []
            for stat in ("mean", "share"):
                h = np.asarray(hits[(name, stat)], dtype=float)
                cells.append(f"{h.mean():.3f} +- {h.std(ddof=1) / math.sqrt(h.size):.3f}")
            print(f"| {name} | {design} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
