"""The statistics of the findings (layer 2, beside engine, checkpoints and store; pure functions of arrays): each
method named with its null and its unit (docs/SCORES.md): Wilson intervals of a dormant rate, confident states and
the transitions between them (the wild cluster bootstrap with the maximum over checkpoints, Benjamini-Hochberg
or -Yekutieli over heads), McNemar's exact
test of one change, the two-stage bootstrap over layers, the order-statistic interval of a median, exact Poisson
intervals, and their defaults.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.statistics.blocks import (
        InferredClusters as InferredClusters,
        infer_clusters as infer_clusters,
        politis_white_block as politis_white_block,
    )
    from dormant_tasks.statistics.censoring import (
        INTERVAL_CENSORED as INTERVAL_CENSORED,
        interval_median_estimate as interval_median_estimate,
        median_bounds as median_bounds,
    )
    from dormant_tasks.statistics.cluster_states import (
        StateDecision as StateDecision,
        checkpoint_rate_interval as checkpoint_rate_interval,
        decide_states as decide_states,
        decision_clusters as decision_clusters,
        rate_interval as rate_interval,
    )
    from dormant_tasks.statistics.confidence import (
        Z95 as Z95,
        bh_qvalues as bh_qvalues,
        discordant as discordant,
        mcnemar_exact_p as mcnemar_exact_p,
        pack_inputs as pack_inputs,
        unpack_inputs as unpack_inputs,
        wilson_interval as wilson_interval,
    )
    from dormant_tasks.statistics.defaults import (
        FDR as FDR,
        FDR_METHOD as FDR_METHOD,
        FDR_METHODS as FDR_METHODS,
        PAIRED_FDR_FAMILIES as PAIRED_FDR_FAMILIES,
        RESAMPLES as RESAMPLES,
        SEED as SEED,
        STATE_SAMPLES as STATE_SAMPLES,
    )
    from dormant_tasks.statistics.estimates import (
        DEFAULT_RESAMPLING as DEFAULT_RESAMPLING,
        MIN_UNITS as MIN_UNITS,
        POISSON as POISSON,
        Estimate as Estimate,
        Resampling as Resampling,
        Share as Share,
        bootstrap_interval as bootstrap_interval,
        layered_estimate as layered_estimate,
        median_estimate as median_estimate,
        median_order_interval as median_order_interval,
        poisson_interval as poisson_interval,
        rate_estimate as rate_estimate,
        resample_heads as resample_heads,
        scaled as scaled,
        share_estimate as share_estimate,
    )
    from dormant_tasks.statistics.options import (
        MAX_RESAMPLES as MAX_RESAMPLES,
        fdr_options as fdr_options,
        paired_fdr_option as paired_fdr_option,
        resampling_options as resampling_options,
        statistics_options as statistics_options,
    )
    from dormant_tasks.statistics.paired import (
        PairedChanges as PairedChanges,
        paired_changes as paired_changes,
        pooled_qvalues as pooled_qvalues,
        sign_flip_p as sign_flip_p,
    )
    from dormant_tasks.statistics.reachable import (
        ClusterReach as ClusterReach,
        cluster_reach as cluster_reach,
        cluster_sizes as cluster_sizes,
        largest_z as largest_z,
    )
    from dormant_tasks.statistics.states import (
        ACTIVE as ACTIVE,
        DORMANT as DORMANT,
        UNDETERMINED as UNDETERMINED,
        StateTransitions as StateTransitions,
        between_states as between_states,
        fdr_qvalues as fdr_qvalues,
        state_pvalues as state_pvalues,
        state_transitions as state_transitions,
    )

__all__, __getattr__, __dir__ = attach(__name__)
