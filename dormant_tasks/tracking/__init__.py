"""Tracking a series (layer 3, above engine, checkpoints, store and statistics): the track request and run
(`TrackRequest`, `series_state`, the per-checkpoint work, failures), calibration sets, taus and dormancy masks,
transitions and agreement derived again when stale, and `SeriesView` (the one reader of what is current). The
findings judged from a series live in `dormant_tasks.findings`.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.tracking.agreement import (
        set_agreement as set_agreement,
        stored_agreement as stored_agreement,
    )
    from dormant_tasks.tracking.budget import (
        available_positions as available_positions,
        budgeted_search as budgeted_search,
        coarse_pass as coarse_pass,
        first_pass as first_pass,
        next_refinements as next_refinements,
    )
    from dormant_tasks.tracking.budget_run import run_budgeted as run_budgeted
    from dormant_tasks.tracking.calibration import (
        DEMO_CORPUS as DEMO_CORPUS,
        bundled_set_names as bundled_set_names,
        calibration_kind as calibration_kind,
        load_calibration as load_calibration,
        load_calibration_sets as load_calibration_sets,
        texts_calibration as texts_calibration,
        winogrande_calibration as winogrande_calibration,
    )
    from dormant_tasks.tracking.checkpoint_work import (
        CheckpointRows as CheckpointRows,
        ScoredCheckpoint as ScoredCheckpoint,
        compute_checkpoint as compute_checkpoint,
        reaggregate_from_input_scores as reaggregate_from_input_scores,
        rows_of as rows_of,
        score_checkpoint as score_checkpoint,
        write_checkpoint as write_checkpoint,
    )
    from dormant_tasks.tracking.decision import decided_file as decided_file
    from dormant_tasks.tracking.derive import (
        SeriesSummary as SeriesSummary,
        derive_series as derive_series,
        derived_lag as derived_lag,
        fdr_rule as fdr_rule,
        mask_change_counts as mask_change_counts,
        rederive as rederive,
    )
    from dormant_tasks.tracking.dry_run import (
        DryRun as DryRun,
        format_dry_run as format_dry_run,
        parse_bandwidth as parse_bandwidth,
        plan_dry_run as plan_dry_run,
    )
    from dormant_tasks.tracking.failures import (
        checkpoint_outcome as checkpoint_outcome,
        failed_checkpoints as failed_checkpoints,
        record_failure as record_failure,
    )
    from dormant_tasks.tracking.indicators import input_clusters as input_clusters
    from dormant_tasks.tracking.integrity import (
        record_audit as record_audit,
        set_aside_checkpoints as set_aside_checkpoints,
        set_aside_label as set_aside_label,
        set_aside_stored_duplicates as set_aside_stored_duplicates,
        shared_weights as shared_weights,
    )
    from dormant_tasks.tracking.listing import (
        Resolution as Resolution,
        listed_checkpoints as listed_checkpoints,
        record_listing as record_listing,
        series_resolution as series_resolution,
    )
    from dormant_tasks.tracking.masks import (
        QUANTILE_DEFAULTS as QUANTILE_DEFAULTS,
        pooled_threshold as pooled_threshold,
    )
    from dormant_tasks.tracking.plan import (
        NothingSelected as NothingSelected,
        SeriesState as SeriesState,
        SeriesTaus as SeriesTaus,
        plan_series as plan_series,
    )
    from dormant_tasks.tracking.positions import (
        TauPosition as TauPosition,
        tau_positions as tau_positions,
        tau_warnings_of as tau_warnings_of,
    )
    from dormant_tasks.tracking.probe import PROBE_SET as PROBE_SET, induction_probe as induction_probe
    from dormant_tasks.tracking.request import (
        SELECTION_OPTIONS as SELECTION_OPTIONS,
        Runner as Runner,
        TrackRequest as TrackRequest,
    )
    from dormant_tasks.tracking.results import (
        CheckpointResult as CheckpointResult,
        common_columns as common_columns,
        known_commit as known_commit,
    )
    from dormant_tasks.tracking.series import (
        SeriesView as SeriesView,
        StoreFolder as StoreFolder,  # the checked store, for the parts that read it through tracking
        Table as Table,  # the store's table names, for the parts that read it through tracking
        open_views as open_views,
        stored_files as stored_files,
        stored_series as stored_series,
    )
    from dormant_tasks.tracking.series_taus import (
        resolve_series_taus as resolve_series_taus,
        taus_checkpoint as taus_checkpoint,
        taus_step as taus_step,
    )
    from dormant_tasks.tracking.tracker import (
        TrackResult as TrackResult,
        pending_revisions as pending_revisions,
        series_state as series_state,
        stored_rates as stored_rates,
    )
    from dormant_tasks.tracking.transitions import (
        apply_decisions as apply_decisions,
        confirm_transitions as confirm_transitions,
        derive_transitions as derive_transitions,
        dormant_matrices as dormant_matrices,
        head_histories as head_histories,
        mark_blips as mark_blips,
        predecessors as predecessors,
        state_decisions as state_decisions,
    )
    from dormant_tasks.tracking.upgrade import upgrade_store as upgrade_store

__all__, __getattr__, __dir__ = attach(__name__)
