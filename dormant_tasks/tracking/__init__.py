"""Tracking a series (layer 3, above engine, checkpoints and store): the track request and run (`TrackRequest`,
`series_state`, the per-checkpoint work, failures), calibration sets, taus and dormancy masks, transitions and
agreement derived again when stale, `SeriesView` (the one reader of what is current) and the three findings.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import lazy_face

if TYPE_CHECKING:  # the public names, imported on first use (`dormant_tasks.face`)
    from dormant_tasks.tracking.agreement import stored_agreement
    from dormant_tasks.tracking.calibration import (
        DEMO_CORPUS,
        bundled_set_names,
        load_calibration,
        load_calibration_sets,
        texts_calibration,
    )
    from dormant_tasks.tracking.checkpoint_work import (
        CheckpointRows,
        ScoredCheckpoint,
        compute_checkpoint,
        reaggregate_from_input_scores,
        rows_of,
        score_checkpoint,
        write_checkpoint,
    )
    from dormant_tasks.tracking.confidence import Z95, wilson_interval
    from dormant_tasks.tracking.defaults import FDR, RESAMPLES, SEED
    from dormant_tasks.tracking.derive import SeriesSummary, derive_series, fdr_level, rederive
    from dormant_tasks.tracking.estimates import DEFAULT_RESAMPLING, Estimate, Resampling, Share
    from dormant_tasks.tracking.failures import (
        CHECKPOINT_FAILURES,
        checkpoint_outcome,
        failed_checkpoints,
        record_failure,
    )
    from dormant_tasks.tracking.findings import EARLY, Findings, path_tokens, series_findings
    from dormant_tasks.tracking.masks import QUANTILE_DEFAULTS, pooled_threshold
    from dormant_tasks.tracking.plan import SeriesState, SeriesTaus, plan_series
    from dormant_tasks.tracking.positions import TauPosition, tau_positions, tau_warnings_of
    from dormant_tasks.tracking.request import Runner, TrackRequest
    from dormant_tasks.tracking.results import CheckpointResult, common_columns, known_commit
    from dormant_tasks.tracking.series import SeriesView, open_views, stored_files, stored_series
    from dormant_tasks.tracking.series_taus import resolve_series_taus, taus_checkpoint
    from dormant_tasks.tracking.tracker import TrackResult, pending_revisions, series_state
    from dormant_tasks.tracking.transitions import (
        confident_at,
        derive_transitions,
        head_histories,
        mark_blips,
        predecessors,
    )
    from dormant_tasks.tracking.upgrade import upgrade_store

__getattr__, __dir__, __all__ = lazy_face(__name__)
