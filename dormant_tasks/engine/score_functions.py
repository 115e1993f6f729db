"""The score functions of docs/SCORES.md §2: public ids, paper names, and the direction that marks a head inactive.

Every other module names functions by these ids (CLI, Parquet `score_fn`, reports).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dormant_tasks.errors import ConfigError, did_you_mean

# Bump when the score engine's results change: stored results of another version are scored again.
SCORING_VERSION = "1"


class Direction(StrEnum):
    """The side of tau on which a score marks a head inactive (stored as "<" / ">")."""

    BELOW = "<"  # inactive if score < tau
    ABOVE = ">"  # inactive if score > tau


@dataclass(frozen=True)
class ScoreFunction:
    id: str
    paper_name: str
    direction: Direction
    normalised: bool  # an _ln/_hn ratio (unitless) rather than a raw-unit score


SCORE_FUNCTIONS: dict[str, ScoreFunction] = {
    f.id: f
    for f in [
        ScoreFunction("awft", "Avg Weight of First Token", Direction.ABOVE, False),
        ScoreFunction("awft_ln", "AWFT (LN)", Direction.ABOVE, True),
        ScoreFunction("aeqd", "Avg Entropy of Query Distributions", Direction.BELOW, False),
        ScoreFunction("aeqd_ln", "AEQD (LN)", Direction.BELOW, True),
        ScoreFunction("ftvvn", "First Token Value Vector Norm", Direction.BELOW, False),
        ScoreFunction("ftvvn_ln", "FTVVN (LN)", Direction.BELOW, True),
        ScoreFunction("avvn", "Avg Value Vector Norm", Direction.BELOW, False),
        ScoreFunction("avvn_ln", "AVVN (LN)", Direction.BELOW, True),
        ScoreFunction("lthon", "Last Token Head Output Norm", Direction.BELOW, False),
        ScoreFunction("lthon_ln", "LTHON (LN)", Direction.BELOW, True),
        ScoreFunction("lthon_hn", "LTHON (HN)", Direction.BELOW, True),
        ScoreFunction("ahon", "Avg Head Output Norm", Direction.BELOW, False),
        ScoreFunction("ahon_ln", "AHON (LN)", Direction.BELOW, True),
        ScoreFunction("fhon", "Full Head Output Norm", Direction.BELOW, False),
        ScoreFunction("fhon_ln", "FHON (LN)", Direction.BELOW, True),
        ScoreFunction("random", "Random baseline", Direction.BELOW, False),
    ]
}

# The 15 deterministic functions, in the paper's order; `random` is the seeded baseline.
DETERMINISTIC_IDS: tuple[str, ...] = tuple(k for k in SCORE_FUNCTIONS if k != "random")
ALL_IDS: tuple[str, ...] = tuple(SCORE_FUNCTIONS)


def get_score_function(name: str) -> ScoreFunction:
    try:
        return SCORE_FUNCTIONS[name]
    except KeyError:
        raise ConfigError(
            f"unknown score function {name!r}{did_you_mean(name, SCORE_FUNCTIONS)}; "
            f"choose from: {', '.join(SCORE_FUNCTIONS)}"
        ) from None


def parse_score_functions(names) -> list[str]:
    """Validate a list of ids (or comma-separated strings); None or 'all' means every function."""
    if names is None:
        return list(ALL_IDS)
    out: list[str] = []
    for item in names:
        for name in str(item).split(","):
            name = name.strip()
            if not name:
                continue
            if name == "all":
                out.extend(i for i in ALL_IDS if i not in out)
                continue
            get_score_function(name)
            if name not in out:
                out.append(name)
    if not out:
        raise ConfigError("no score function given; use e.g. --scores ahon_ln,lthon_ln or --scores all")
    return out


def is_inactive(score, tau, direction: str):
    """Elementwise inactive test; NaN is never inactive (comparisons with NaN are False)."""
    return score > tau if direction == ">" else score < tau
