"""The statistics of the findings (layer 2, beside engine, checkpoints and store; pure functions of arrays): each
method named with its null and its unit (docs/SCORES.md): Wilson intervals of a dormant rate, confident states and
the transitions between them (the wild cluster bootstrap with the maximum over checkpoints, Benjamini-Hochberg
or -Yekutieli over heads), McNemar's exact
test of one change, the two-stage bootstrap over layers, the order-statistic interval of a median, exact Poisson
intervals, and their defaults.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "ACTIVE",
    "DEFAULT_RESAMPLING",
    "DORMANT",
    "Estimate",
    "FDR",
    "FDR_METHOD",
    "FDR_METHODS",
    "MIN_UNITS",
    "ORDER",
    "PERMUTATIONS",
    "POISSON",
    "RESAMPLES",
    "Resampling",
    "SEED",
    "STATE_SAMPLES",
    "Share",
    "StateDecision",
    "StateTransitions",
    "UNDETERMINED",
    "Z95",
    "between_states",
    "bh_qvalues",
    "bootstrap_interval",
    "cluster_bootstrap",
    "decide_states",
    "discordant",
    "excludes_half",
    "fdr_qvalues",
    "layered_estimate",
    "mcnemar_exact_p",
    "median_estimate",
    "median_order_interval",
    "n_layers",
    "pack_inputs",
    "poisson_interval",
    "rate_estimate",
    "resample_heads",
    "scaled",
    "share_estimate",
    "state_pvalues",
    "state_transitions",
    "unpack_inputs",
    "wilson_interval",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.statistics.cluster_states import StateDecision, decide_states
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
    from dormant_tasks.statistics.defaults import (
        FDR,
        FDR_METHOD,
        FDR_METHODS,
        PERMUTATIONS,
        RESAMPLES,
        SEED,
        STATE_SAMPLES,
    )
    from dormant_tasks.statistics.estimates import (
        DEFAULT_RESAMPLING,
        MIN_UNITS,
        ORDER,
        POISSON,
        Estimate,
        Resampling,
        Share,
        bootstrap_interval,
        cluster_bootstrap,
        layered_estimate,
        median_estimate,
        median_order_interval,
        n_layers,
        poisson_interval,
        rate_estimate,
        resample_heads,
        scaled,
        share_estimate,
    )
    from dormant_tasks.statistics.states import (
        ACTIVE,
        DORMANT,
        UNDETERMINED,
        StateTransitions,
        between_states,
        fdr_qvalues,
        state_pvalues,
        state_transitions,
    )

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "cluster_states": ["StateDecision", "decide_states"],
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
        "defaults": ["FDR", "FDR_METHOD", "FDR_METHODS", "PERMUTATIONS", "RESAMPLES", "SEED", "STATE_SAMPLES"],
        "estimates": [
            "DEFAULT_RESAMPLING",
            "Estimate",
            "MIN_UNITS",
            "ORDER",
            "POISSON",
            "Resampling",
            "Share",
            "bootstrap_interval",
            "cluster_bootstrap",
            "layered_estimate",
            "median_estimate",
            "median_order_interval",
            "n_layers",
            "poisson_interval",
            "rate_estimate",
            "resample_heads",
            "scaled",
            "share_estimate",
        ],
        "states": [
            "ACTIVE",
            "DORMANT",
            "StateTransitions",
            "UNDETERMINED",
            "between_states",
            "fdr_qvalues",
            "state_pvalues",
            "state_transitions",
        ],
    },
)
