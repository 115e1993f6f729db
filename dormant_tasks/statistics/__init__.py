"""The statistics of the findings (layer 2, beside engine, checkpoints and store; pure functions of arrays): each
method named with its null and its unit (docs/SCORES.md): Wilson intervals of a dormant rate, McNemar's exact
test and Benjamini-Hochberg q-values of a transition, bootstrap and exact Poisson intervals, and their defaults.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "DEFAULT_RESAMPLING",
    "Estimate",
    "FDR",
    "PERMUTATIONS",
    "POISSON",
    "REPEATS",
    "RESAMPLES",
    "Resampling",
    "SEED",
    "Share",
    "Z95",
    "bh_qvalues",
    "bootstrap_interval",
    "discordant",
    "excludes_half",
    "mcnemar_exact_p",
    "median_estimate",
    "pack_inputs",
    "poisson_interval",
    "rate_estimate",
    "resample_heads",
    "scaled",
    "unpack_inputs",
    "wilson_interval",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.statistics.confidence import (
        Z95,
        bh_qvalues,
        discordant,
        excludes_half,
        mcnemar_exact_p,
        pack_inputs,
        unpack_inputs,
        wilson_interval,
    )
    from dormant_tasks.statistics.defaults import FDR, PERMUTATIONS, REPEATS, RESAMPLES, SEED
    from dormant_tasks.statistics.estimates import (
        DEFAULT_RESAMPLING,
        POISSON,
        Estimate,
        Resampling,
        Share,
        bootstrap_interval,
        median_estimate,
        poisson_interval,
        rate_estimate,
        resample_heads,
        scaled,
    )

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "confidence": [
            "Z95",
            "bh_qvalues",
            "discordant",
            "excludes_half",
            "mcnemar_exact_p",
            "pack_inputs",
            "unpack_inputs",
            "wilson_interval",
        ],
        "defaults": ["FDR", "PERMUTATIONS", "REPEATS", "RESAMPLES", "SEED"],
        "estimates": [
            "DEFAULT_RESAMPLING",
            "POISSON",
            "Estimate",
            "Resampling",
            "Share",
            "bootstrap_interval",
            "median_estimate",
            "poisson_interval",
            "rate_estimate",
            "resample_heads",
            "scaled",
        ],
    },
)
