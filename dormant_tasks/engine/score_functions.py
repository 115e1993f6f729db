"""The registry of score functions (docs/SCORES.md §2): one record per function, which every other part reads.

A record says what the function is (id, paper name, per-input definition), which raw per-head statistic it
reads and how it is normalised (the engine's torch and Triton paths compute only the raw statistics and derive
every function from these records), on which side of tau a head is inactive, its default tau (a fixed value or
a quantile of the reference checkpoint) and whether `track` scores it by default. Adding a function is one
record here, plus its raw statistic in `engine/attention.py` when it reads a new one. Every other module names
functions by these ids (CLI, Parquet `score_fn`, reports); `DEFAULT_FN` is the function a command uses when
the user names none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from dormant_tasks.errors import ConfigError, did_you_mean

# Bump when the score engine's results change: stored results of another version are scored again.
SCORING_VERSION = "1"

DEFAULT_QUANTILE = 0.15  # the default quantile of a reference-quantile tau (docs/SCORES.md §4)

# A head's state at a checkpoint, from its per-input verdicts (`is_inactive`; aggregated by `tracking.masks`): the
# one sentence the README, the report and `track --help` state, never "dormant if its mean score is past tau".
DORMANT_RULE = (
    "A head is dormant at a checkpoint when it is inactive (its score on the inactive side of its function's tau) "
    "on at least half of the calibration inputs, whatever its mean score."
)


class Direction(StrEnum):
    """The side of tau on which a score marks a head inactive (stored as "<" / ">")."""

    BELOW = "<"  # inactive if score < tau
    ABOVE = ">"  # inactive if score > tau


class Normaliser(StrEnum):
    """How a ratio function divides its raw statistic."""

    LAYER = "layer"  # by the mean of `by` over the layer's heads, for the same input ("_ln")
    HEAD = "head"  # by the same head's `by` ("_hn")


@dataclass(frozen=True)
class DefaultTau:
    """A function's default tau: a fixed `value`, or the `quantile` of the reference checkpoint's scores."""

    value: float | None = None
    quantile: float | None = None

    def __str__(self) -> str:
        return f"q = {self.quantile:g} of the reference" if self.value is None else f"{self.value:g}"


QUANTILE = DefaultTau(quantile=DEFAULT_QUANTILE)
HALF_LAYER_MEAN = DefaultTau(value=0.5)


@dataclass(frozen=True)
class ScoreFunction:
    id: str
    paper_name: str
    direction: Direction
    raw: str | None  # the raw per-head statistic it reads (a raw function's own id); None: the random baseline
    definition: str  # the per-input definition, as docs/SCORES.md §2 writes it
    tau: DefaultTau
    tracked: bool = True  # in `track`'s default set (docs/SCORES.md §4, "The default set")
    normaliser: Normaliser | None = None  # None: the raw statistic itself
    by: str | None = None  # the raw statistic of the denominator (with a normaliser)
    at_most: float = math.inf  # every score lies in [0, at_most] (1: a weight or a probability)
    role: str | None = None  # a head-role function: its target (ROLE_TARGETS); None: a dormancy function
    group: str = "all"  # what `--scores GROUP` adds it with: "all" (the paper's and the baseline), "roles", "sink"

    @property
    def normalised(self) -> bool:
        """An _ln/_hn ratio (unitless) rather than a raw-unit score."""
        return self.normaliser is not None


def _raw(fn_id: str, paper_name: str, direction: Direction, definition: str, tau: DefaultTau, **kw) -> ScoreFunction:
    return ScoreFunction(fn_id, paper_name, direction, fn_id, definition, tau, **kw)


def _ln(raw: ScoreFunction, tau: DefaultTau = HALF_LAYER_MEAN, note: str = "", **kw) -> ScoreFunction:
    """The raw function divided by its own layer mean: `<raw>_ln`, named `<ABBREVIATION> (LN)`."""
    name = f"{raw.id.upper()} (LN)"
    return ScoreFunction(
        f"{raw.id}_ln",
        name,
        raw.direction,
        raw.id,
        f"`{raw.id}[h] / mean_h' {raw.id}[h']`{note}",
        tau,
        normaliser=Normaliser.LAYER,
        by=raw.id,
        **kw,
    )


_AWFT = _raw(
    "awft",
    "Avg Weight of First Token",
    Direction.ABOVE,
    "`(1/S) sum_i A[h, i, 0]`: mean attention that the queries give to token 0",
    DefaultTau(value=0.8),
    at_most=1.0,
    tracked=False,  # a fixed 0.8 marks almost nothing on trained models (docs/SCORES.md §4)
)
_AEQD = _raw(
    "aeqd",
    "Avg Entropy of Query Distributions",
    Direction.BELOW,
    "`(1/S) sum_i ( -sum_{j<=i} A[h,i,j] ln A[h,i,j] )`, with `0 ln 0 = 0` (nats)",
    QUANTILE,
)
_FTVVN = _raw("ftvvn", "First Token Value Vector Norm", Direction.BELOW, "`‖v[h, 0]‖`", QUANTILE)
_AVVN = _raw("avvn", "Avg Value Vector Norm", Direction.BELOW, "`(1/S) sum_j ‖v[h, j]‖`", QUANTILE)
_LTHON = _raw("lthon", "Last Token Head Output Norm", Direction.BELOW, "`‖o[h, S-1]‖`", QUANTILE)
_AHON = _raw("ahon", "Avg Head Output Norm", Direction.BELOW, "`(1/S) sum_i ‖o[h, i]‖`", QUANTILE)
_FHON = _raw(
    "fhon",
    "Full Head Output Norm",
    Direction.BELOW,
    "`(1/S) sum_i ‖o[h, i] W_O[h]^T‖`, the norm taken in the model's width (the paper's appendix)",
    QUANTILE,
)

# The head-role functions (Xu, "When Do Attention Circuits Form?", arXiv 2606.02378): the attention that the input's
# last query gives to one target position (or the mean over a few), read from the same pass. A head's role is not
# a per-input verdict against tau but Xu's selectivity, the ratio of two checkpoint means (`engine.roles`), so these
# records are out of the default set and out of `--scores all`: `--scores roles` (or their ids) asks for them.
ROLE_CLASSES: tuple[str, ...] = ("induction", "duplicate", "previous", "self", "first", "local")
ROLE_TARGETS: tuple[str, ...] = ROLE_CLASSES + ("baseline",)  # the classes' targets and the baseline they divide by
ROLE_TAU = DefaultTau(value=0.3)
# Gu et al., "When Attention Sink Emerges in Language Models" (ICLR 2025): Sink^eps_1 over the first T tokens
SINK_T = 64
SINK_EPS = 0.3  # a per-input mask only: more than 0.3 of the last query's attention on the target
_ROLE_DEFINITIONS = {
    "induction": "the position after the latest earlier occurrence of the last token (the `B` of `A B ... A`)",
    "duplicate": "the latest earlier occurrence of the last token",
    "previous": "position `S-2`",
    "self": "position `S-1`",
    "first": "position 0",
    "local": "the mean over positions `S-6 .. S-3` (the four before the previous token)",
    "baseline": "the mean over 50 positions drawn once per input length with `RandomState(0)` in `[1, S-1)`, "
    "never 0 or the last six",
}


def _role(target: str) -> ScoreFunction:
    name = "baseline" if target == "baseline" else f"{target} target"
    return ScoreFunction(
        f"attn_{target}",
        f"Attention to the {name} (Xu 2026)",
        Direction.ABOVE,
        f"attn_{target}",
        f"`A[h, S-1, t]` at the last query, t = {_ROLE_DEFINITIONS[target]}; NaN where the target is undefined "
        "or outside the last query's sliding window",
        ROLE_TAU,
        tracked=False,
        at_most=1.0,
        role=target,
        group="roles",
    )


SCORE_FUNCTIONS: dict[str, ScoreFunction] = {
    f.id: f
    for f in [
        _AWFT,
        _ln(_AWFT, DefaultTau(value=2.0), tracked=False),  # > 2 layer means: unreachable where a layer sinks
        _AEQD,
        _ln(_AEQD),
        _FTVVN,
        _ln(_FTVVN),
        _AVVN,
        _ln(_AVVN),
        _LTHON,
        ScoreFunction(
            "lthon_ln",
            "LTHON (LN)",
            Direction.BELOW,
            "lthon",
            "`‖o[h, S-1]‖ / mean_h' ahon[h']`: the denominator is the layer mean of **AHON**, not of LTHON",
            HALF_LAYER_MEAN,
            normaliser=Normaliser.LAYER,
            by="ahon",
        ),
        ScoreFunction(
            "lthon_hn",
            "LTHON (HN)",
            Direction.BELOW,
            "lthon",
            "`‖o[h, S-1]‖ / ahon[h]`: normalised by the same head's AHON",
            HALF_LAYER_MEAN,
            normaliser=Normaliser.HEAD,
            by="ahon",
        ),
        _AHON,
        _ln(_AHON, note=': the v1 paper\'s "dormant head" rule, and the default function (`DEFAULT_FN`)'),
        _FHON,
        _ln(_FHON),
        ScoreFunction(
            "random",
            "Random baseline",
            Direction.BELOW,
            None,
            "`u ~ U(0, 1)`, one draw per (input, layer, head), seeded",
            DefaultTau(value=DEFAULT_QUANTILE),  # a probability p
            at_most=1.0,
            tracked=False,  # p = 0.15 is a zero baseline by construction (docs/SCORES.md §2)
        ),
        *map(_role, ROLE_TARGETS),
        ScoreFunction(
            f"awft_{SINK_T}",
            f"Avg Weight of First Token over the first {SINK_T} queries (Gu et al. 2025)",
            Direction.ABOVE,
            f"awft_{SINK_T}",
            f"`(1/T) sum_(i<T) A[h, i, 0]` with `T = min(S, {SINK_T})`, query 0 included: Gu's first-token weight "
            f"per input; a head is a sink when its mean over the inputs exceeds eps = {SINK_EPS} (`sink_share`)",
            DefaultTau(value=SINK_EPS),
            tracked=False,
            at_most=1.0,
            group="sink",
        ),
    ]
}


ROLE_IDS: tuple[str, ...] = tuple(k for k, f in SCORE_FUNCTIONS.items() if f.group == "roles")
SINK_ID = f"awft_{SINK_T}"  # Gu's first-token weight; `--scores sink`

# The function a command uses when the user names none (status's count, the report's per-function figures,
# the findings): AHON (LN), the v1 paper's "dormant head" rule.
DEFAULT_FN = "ahon_ln"

# The deterministic functions (the paper's 15, in its order); `random` is the seeded baseline.
DETERMINISTIC_IDS: tuple[str, ...] = tuple(
    k for k, f in SCORE_FUNCTIONS.items() if f.raw is not None and f.group == "all"
)
# `--scores all`: the paper's 15 and the baseline; the role functions are their own group (`--scores roles`)
ALL_IDS: tuple[str, ...] = tuple(k for k, f in SCORE_FUNCTIONS.items() if f.group == "all")
# `track`'s default set: the functions whose default taus mean something on any model (docs/SCORES.md §4).
TRACKED_IDS: tuple[str, ...] = tuple(k for k, f in SCORE_FUNCTIONS.items() if f.tracked)
# The raw statistics the engine computes, in the registry's order.
RAW_IDS: tuple[str, ...] = tuple(k for k, f in SCORE_FUNCTIONS.items() if f.raw == k)


GROUPS = ("all", "roles", "sink")  # `--scores GROUP`


class Reduce(StrEnum):
    """How a raw statistic reduces its per-position quantity [batch, head, seq] to one value per input and head."""

    MEAN = "mean"  # over the input's positions (padding left out)
    LAST = "last"  # at the input's last position
    FIRST = "first"  # at position 0
    HEAD = "head"  # over the input's first `first_t` positions (all of a shorter input)
    TARGET = "target"  # the mean over the record's target positions of the input (engine.roles.target_positions)


@dataclass(frozen=True)
class RawStatistic:
    """How the engine computes a raw statistic: the per-position quantity it reads and its reduction. Both the torch
    path (`engine.attention.layer_scores`) and the Triton kernel's (`triton_layer_scores`) compute each quantity
    once, whichever statistics read it, and reduce them through this table (`attention.reduce_raw`)."""

    quantity: str  # first_weight, entropy: of each query's softmax row; output_norm, full_output_norm: of each query's
    # head output (through W_O[h] for the full norm); value_norm: of each key's value vector; last_weights: the
    # attention the input's last query gives each key (0 where it cannot see it)
    reduce: Reduce
    target: str | None = None  # with Reduce.TARGET: which of ROLE_TARGETS
    first_t: int | None = None  # with Reduce.HEAD: how many of the first positions


RAW_STATISTICS: dict[str, RawStatistic] = {
    "awft": RawStatistic("first_weight", Reduce.MEAN),
    "aeqd": RawStatistic("entropy", Reduce.MEAN),
    "ftvvn": RawStatistic("value_norm", Reduce.FIRST),
    "avvn": RawStatistic("value_norm", Reduce.MEAN),
    "lthon": RawStatistic("output_norm", Reduce.LAST),
    "ahon": RawStatistic("output_norm", Reduce.MEAN),
    "fhon": RawStatistic("full_output_norm", Reduce.MEAN),
    **{f"attn_{t}": RawStatistic("last_weights", Reduce.TARGET, t) for t in ROLE_TARGETS},
    f"awft_{SINK_T}": RawStatistic("first_weight", Reduce.HEAD, first_t=SINK_T),
}
assert tuple(RAW_STATISTICS) == RAW_IDS, "every raw statistic of the registry has its record, in its order"


def quantities(raws) -> set[str]:
    """The per-position quantities the raw statistics `raws` read."""
    return {RAW_STATISTICS[r].quantity for r in raws}


def get_score_function(name: str) -> ScoreFunction:
    try:
        return SCORE_FUNCTIONS[name]
    except KeyError:
        raise ConfigError(
            f"unknown score function {name!r}{did_you_mean(name, SCORE_FUNCTIONS)}; "
            f"choose from: {', '.join(SCORE_FUNCTIONS)}"
        ) from None


def raw_statistics(score_fns) -> set[str]:
    """The raw statistics the functions `score_fns` read (numerators and denominators); none for `random`."""
    out: set[str] = set()
    for fn in score_fns:
        f = SCORE_FUNCTIONS[fn]
        out.update(x for x in (f.raw, f.by) if x is not None)
    return out


def parse_score_functions(names, default: tuple[str, ...] = ALL_IDS) -> list[str]:
    """Validate a list of ids (or comma-separated strings); None means `default`, 'all' the paper's functions and the
    random baseline (ALL_IDS), 'roles' the head-role functions (ROLE_IDS), 'sink' Gu's first-token weight."""
    if names is None:
        return list(default)
    out: list[str] = []
    for item in names:
        for name in str(item).split(","):
            name = name.strip()
            if not name:
                continue
            if name in GROUPS:
                out.extend(i for i, f in SCORE_FUNCTIONS.items() if f.group == name and i not in out)
                continue
            get_score_function(name)
            if name not in out:
                out.append(name)
    if not out:
        raise ConfigError(f"no score function given; use e.g. --scores {DEFAULT_FN},lthon_ln or --scores all")
    return out


def is_inactive(score, tau, direction: str):
    """Elementwise inactive test; NaN is never inactive (comparisons with NaN are False)."""
    return score > tau if direction == ">" else score < tau
