"""From per-input scores to a checkpoint's dormancy mask (docs/SCORES.md §3): taus and aggregation.

A tau is either a fixed value or "quantile q of a reference checkpoint's per-input scores, pooled over
layers, heads and inputs". Either way it is fixed once per series and reused for every checkpoint, so
that the fraction of dormant heads can move between checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dormant_tasks.engine import SCORE_FUNCTIONS, get_score_function, is_inactive
from dormant_tasks.errors import ConfigError
from dormant_tasks.statistics import checkpoint_rate_interval, pack_inputs

# The functions whose default tau is a quantile of the reference checkpoint (the raw-unit ones; the registry's
# `tau`, docs/SCORES.md §4)
QUANTILE_DEFAULTS = tuple(fn for fn, f in SCORE_FUNCTIONS.items() if f.tau.quantile is not None)


@dataclass(frozen=True)
class TauSpec:
    """How a function's tau is chosen: a fixed `value`, or the `quantile` of a reference checkpoint."""

    score_fn: str
    value: float | None = None
    quantile: float | None = None

    def __post_init__(self):
        get_score_function(self.score_fn)
        if (self.value is None) == (self.quantile is None):
            raise ConfigError(f"tau for {self.score_fn!r}: give exactly one of a fixed value or a quantile")
        if self.quantile is not None and not 0.0 <= self.quantile <= 1.0:
            raise ConfigError(f"tau for {self.score_fn!r}: quantile {self.quantile} is outside [0, 1]")


@dataclass(frozen=True)
class Tau:
    """A resolved tau, stored with every result."""

    score_fn: str
    value: float
    direction: str
    source: str  # "fixed" or "quantile"
    quantile: float | None = None
    reference_revision: str | None = None

    def row(self) -> dict:
        """Its columns of the `taus` table (the API's `Series.taus()` rows too)."""
        return {
            "score_fn": self.score_fn,
            "tau": self.value,
            "direction": self.direction,
            "source": self.source,
            "quantile": self.quantile,
            "reference_revision": self.reference_revision,
        }


def default_tau_spec(score_fn: str) -> TauSpec:
    """The function's default tau, as its registry record gives it (engine.SCORE_FUNCTIONS)."""
    tau = get_score_function(score_fn).tau
    return TauSpec(score_fn, value=tau.value, quantile=tau.quantile)


_TAU_RE = re.compile(r"^\s*(?P<fn>[a-z_]+)\s*=\s*(?P<q>q)?(?P<num>[-+0-9.eE]+)\s*$")


def parse_tau_option(text: str) -> TauSpec:
    """`FN=VALUE` (fixed tau) or `FN=qQ` (quantile Q in [0, 1] of the reference checkpoint), e.g. `ahon=q0.1`."""
    m = _TAU_RE.match(text)
    if not m:
        raise ConfigError(f"cannot parse --tau {text!r}; write FN=VALUE (e.g. ahon_ln=0.4) or FN=qQ (e.g. ahon=q0.15)")
    try:
        number = float(m["num"])
    except ValueError:
        raise ConfigError(f"cannot parse the number in --tau {text!r}; e.g. ahon_ln=0.4 or ahon=q0.15") from None
    if not np.isfinite(number):
        raise ConfigError(f"--tau {text!r}: the value must be a finite number")
    if m["q"]:
        return TauSpec(m["fn"], quantile=number)
    return TauSpec(m["fn"], value=number)


def tau_specs(score_fns, overrides=()) -> dict[str, TauSpec]:
    """Default specs for `score_fns`, replaced by `overrides` (TauSpecs or `--tau` strings)."""
    specs = {fn: default_tau_spec(fn) for fn in score_fns}
    for item in overrides:
        spec = parse_tau_option(item) if isinstance(item, str) else item
        if spec.score_fn not in specs:
            raise ConfigError(
                f"--tau given for {spec.score_fn!r}, which is not among the scored functions "
                f"({', '.join(specs)}); add it to --scores or drop the --tau"
            )
        specs[spec.score_fn] = spec
    return specs


def needs_reference(specs: dict[str, TauSpec]) -> bool:
    return any(s.quantile is not None for s in specs.values())


def pooled_threshold(values: np.ndarray, q: float, direction: str) -> float:
    """The q-quantile (linear interpolation) of per-input scores pooled over layers, heads and inputs.

    For ">" functions (inactive if score > tau) the (1 - q)-quantile is used, so that q is always
    the fraction of pooled scores on the inactive side. NaN scores are left out.
    """
    flat = np.asarray(values, dtype=np.float64).ravel()
    flat = flat[~np.isnan(flat)]
    if flat.size == 0:
        return float("nan")
    return float(np.quantile(flat, q if direction == "<" else 1.0 - q))


def resolve_taus(
    specs: dict[str, TauSpec],
    reference_values: np.ndarray | None = None,
    score_fns=(),
    reference_revision: str | None = None,
) -> dict[str, Tau]:
    """Turn specs into values; quantile specs need the reference checkpoint's per-input scores.

    reference_values: [n_inputs, n_fns, n_layers, n_heads] in the order of `score_fns`.
    """
    taus = {}
    for fn, spec in specs.items():
        direction = SCORE_FUNCTIONS[fn].direction
        if spec.value is not None:
            taus[fn] = Tau(fn, float(spec.value), direction, "fixed")
            continue
        if reference_values is None or fn not in score_fns:
            raise ConfigError(
                f"tau for {fn!r} is a quantile of a reference checkpoint, but no reference scores were given"
            )
        assert spec.quantile is not None  # a spec is a fixed value or a quantile
        value = pooled_threshold(reference_values[:, list(score_fns).index(fn)], spec.quantile, direction)
        taus[fn] = Tau(fn, value, direction, "quantile", spec.quantile, reference_revision)
    return taus


def tau_warnings(taus: dict[str, Tau], reference_values: np.ndarray | None = None, score_fns=()) -> list[str]:
    """One line per tau that cannot mark what it aims at; the tau is kept, the user is told why and what to do.

    - A quantile tau aims at q of the reference's pooled per-input scores on the inactive side. When far
      fewer lie strictly beyond it (< q/2), the scores tie at tau (e.g. every ftvvn is exactly 0, so
      tau = 0 and "< 0" never holds) and the function marks (almost) nothing. Checked only when the
      reference's scores are given: [n_inputs, n_fns, n_layers, n_heads] in the order of `score_fns`.
    - `random` marks each (input, head) with probability p; a head is dormant when inactive on >= half the
      inputs, so with p < 0.5 its dormant rate, Binomial(n, p)/n, reaches 0.5 only by chance fluctuation.
    """
    out = []
    for fn, tau in taus.items():
        if tau.source == "quantile" and tau.quantile is not None and reference_values is not None and fn in score_fns:
            flat = np.asarray(reference_values, dtype=np.float64)[:, list(score_fns).index(fn)].ravel()
            flat = flat[~np.isnan(flat)]
            frac = float(is_inactive(flat, tau.value, tau.direction).mean()) if flat.size else 0.0
            if frac < tau.quantile / 2:
                out.append(
                    f"{fn}: tau = {tau.value:g} (quantile {tau.quantile:g} of {tau.reference_revision}) puts "
                    f"{100 * frac:.1f}% of the reference's pooled scores on the inactive side "
                    f"(score {tau.direction} {tau.value:g}), not about {100 * tau.quantile:g}%: the scores "
                    f"tie at tau, so {fn} marks (almost) no head dormant. Use a fixed --tau {fn}=VALUE "
                    f"(with --retau on a tracked series) or drop {fn} from --scores"
                )
        if fn == "random" and tau.value < 0.5:
            out.append(
                f"random: tau = p = {tau.value:g} < 0.5, but a head is dormant only when inactive on at "
                f"least half the inputs; its dormant rate is Binomial(n, {tau.value:g})/n, so random marks "
                "a head dormant only by chance fluctuation (read it as a zero baseline). For a baseline "
                "that marks heads, use --tau random=P with P near 0.5"
            )
    return out


def taus_id(taus: dict[str, Tau]) -> str:
    """A short hash of the tau values and directions: equal ids <=> comparable dormancy masks."""
    payload = json.dumps(sorted((t.score_fn, repr(t.value), t.direction) for t in taus.values()))
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def aggregate_heads(
    values: np.ndarray, score_fns, taus: dict[str, Tau], n_tokens=None, first_boundary=None, clusters=None
) -> pa.Table:
    """Per (score_fn, layer, head): score, score_std, tau, direction, dormant_rate, dormant, and the 95%
    interval of the rate, dormant_rate_low and dormant_rate_high, by the confident states' rule with the inputs'
    `clusters` (per input; None: each its own) at one checkpoint (`statistics.checkpoint_rate_interval`;
    docs/SCORES.md, "Confidence"); the
    per-input inactive indicators packed into bits, `inactive_inputs` (for the paired test of a transition);
    with the inputs' token counts and first-token kinds, how the score depends on them (`input_effects`).

    values: per-input scores [n_inputs, n_fns, n_layers, n_heads]. `score` and `score_std` ignore NaN
    inputs (a single-token input has aeqd_ln NaN); a NaN input is never inactive but still counts in
    the dormant_rate's denominator (and in the interval's n = n_inputs); `dormant` = dormant_rate >= 0.5.
    """
    values = np.asarray(values, dtype=np.float64)
    n_inputs, _, n_layers, n_heads = values.shape
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")  # [layer, head]
    parts = []
    for f, fn in enumerate(score_fns):
        tau = taus[fn]
        v = values[:, f]  # [input, layer, head]
        with warnings.catch_warnings():  # nanmean of an all-NaN head is NaN by definition (docs/SCORES.md §2)
            warnings.simplefilter("ignore", RuntimeWarning)
            score = np.nanmean(v, axis=0)  # [layer, head]
            score_std = np.nanstd(v, axis=0)  # [layer, head]
            inactive = is_inactive(v, tau.value, tau.direction)  # [input, layer, head]
            rate = inactive.mean(axis=0)  # [layer, head]
        low, high = checkpoint_rate_interval(inactive.reshape(n_inputs, -1).T, clusters)  # [layer * head]
        low, high = low.reshape(rate.shape), high.reshape(rate.shape)
        parts.append(
            {
                "score_fn": np.full(layer.size, fn, dtype=object),
                "layer": layer.ravel().astype(np.int32),
                "head_index": head.ravel().astype(np.int32),
                "score": score.ravel(),
                "score_std": score_std.ravel(),
                "tau": np.full(layer.size, tau.value),
                "direction": np.full(layer.size, tau.direction, dtype=object),
                "dormant_rate": rate.ravel(),
                "dormant": (rate >= 0.5).ravel(),
                "dormant_rate_low": low.ravel(),
                "dormant_rate_high": high.ravel(),
                "inactive_inputs": np.array(pack_inputs(inactive), dtype=object),  # row order: (layer, head)
                **{k: d.ravel() for k, d in input_effects(v, n_tokens, first_boundary).items()},
            }
        )
    columns = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return pa.table(columns)


def input_effects(v: np.ndarray, n_tokens=None, first_boundary=None) -> dict[str, np.ndarray]:
    """How a head's per-input score depends on its input (docs/SCORES.md, "Input dependence"), per [layer, head]:

    - `length_slope`: the least-squares slope of the score on log2(input tokens), i.e. the change of the score
      per doubling of the input length (NaN inputs left out; NaN when the lengths do not vary);
    - `boundary_gap`: mean score on inputs whose first token is the tokenizer's BOS/EOS (the sink) minus the
      mean on the others (NaN when all inputs are of one kind).
    v: [input, layer, head]. Without `n_tokens` / `first_boundary` (re-aggregated scores) the columns are NaN.
    """
    shape = v.shape[1:]
    out = {"length_slope": np.full(shape, np.nan), "boundary_gap": np.full(shape, np.nan)}
    valid = ~np.isnan(v)  # [input, layer, head]
    y = np.where(valid, v, 0.0)
    if n_tokens is not None and len(n_tokens) == len(v):
        x = np.log2(np.maximum(np.asarray(n_tokens, dtype=np.float64), 1.0))[:, None, None] * valid
        n = valid.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mx, my = x.sum(axis=0) / n, y.sum(axis=0) / n
            dx = np.where(valid, x - mx, 0.0)
            sxx = (dx**2).sum(axis=0)
            slope = (dx * (y - my)).sum(axis=0) / sxx
        out["length_slope"] = np.where((n >= 2) & (sxx > 1e-12), slope, np.nan)
    if first_boundary is not None and len(first_boundary) == len(v):
        b = np.asarray(first_boundary, dtype=bool)[:, None, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            on = (y * (valid & b)).sum(axis=0) / (valid & b).sum(axis=0)
            off = (y * (valid & ~b)).sum(axis=0) / (valid & ~b).sum(axis=0)
        out["boundary_gap"] = on - off  # NaN where either group is empty (0 / 0)
    return out
