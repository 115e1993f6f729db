"""The options of the statistics' settings, declared once (`dormant_tasks.options.Option`): the false discovery rate
of confident transitions, and the resampling of the intervals."""

from __future__ import annotations

from dormant_tasks.options import Option, bounded_int, seed_type
from dormant_tasks.statistics.defaults import FDR, FDR_METHOD, FDR_METHODS, PAIRED_FDR_FAMILIES, RESAMPLES, SEED


def fdr_options(default=None, method_default=None, group: str | None = None) -> tuple[Option, Option]:
    """--fdr and --fdr-method: the false discovery rate of the heads called to change confident state."""
    return (
        Option(
            "--fdr",
            "false discovery rate of the heads called to change confident state (a confident transition goes "
            f"between opposite confident states; docs/SCORES.md) (default: {FDR})",
            group,
            {"type": float, "default": default, "metavar": "Q"},
        ),
        Option(
            "--fdr-method",
            "its correction over heads: bh = Benjamini-Hochberg (independent or positively dependent heads), "
            f"by = Benjamini-Yekutieli (any dependence) (default: {FDR_METHOD})",
            group,
            {"choices": tuple(FDR_METHODS), "default": method_default},
        ),
    )


def paired_fdr_option(default: str | None = PAIRED_FDR_FAMILIES[0], group: str | None = None) -> Option:
    """--paired-fdr: the family over which the paired changes' false discovery rate is held."""
    return Option(
        "--paired-fdr",
        "the family over which the paired changes' (heads that changed on these inputs) false discovery rate is "
        "held: pair = the heads of each adjacent pair of checkpoints, function = every pair and head of the "
        "function, series = every pair and head of every function and calibration set of the series "
        f'(docs/SCORES.md, "Paired changes") (default: {PAIRED_FDR_FAMILIES[0]})',
        group,
        {"choices": PAIRED_FDR_FAMILIES, "default": default},
    )


# The most bootstrap resamples a command takes: 50 times the default, past which an interval's ends no longer
# move (a billion would run for days and be printed as if it had been used).
MAX_RESAMPLES = 100_000


def resampling_options(resamples_help: str, low: int = 1) -> tuple[Option, Option]:
    """--resamples and --seed: how many bootstrap resamples of what (`resamples_help`; from `low` to
    `MAX_RESAMPLES`), drawn from which seed."""
    rule = f"from {low}{' (no intervals)' * (low == 0)} to {MAX_RESAMPLES:,}"
    return (
        Option(
            "--resamples",
            f"{resamples_help} (default: %(default)s; at most {MAX_RESAMPLES:,})",
            kw={"type": bounded_int("--resamples", low, MAX_RESAMPLES, rule), "default": RESAMPLES, "metavar": "N"},
        ),
        Option(
            "--seed",
            "seed of the resampling (default: %(default)s)",
            kw={"type": seed_type(), "default": SEED, "metavar": "N"},
        ),
    )


def statistics_options() -> tuple[Option, ...]:
    """--fdr, --resamples and --seed: how the findings decide a confident transition and draw their intervals."""
    return (
        *fdr_options(FDR, FDR_METHOD),
        *resampling_options("bootstrap resamples (of layers and heads) for the findings' intervals"),
    )
