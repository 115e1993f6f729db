"""Tracking a series (layer 3, above engine, checkpoints, store and statistics): the track request and run
(`TrackRequest`, `series_state`, the per-checkpoint work, failures), calibration sets, taus and dormancy masks,
transitions and agreement derived again when stale, and `SeriesView` (the one reader of what is current). The
findings judged from a series live in `dormant_tasks.findings`.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "AGREEMENT_TABLE",
    "CHECKPOINT_FAILURES",
    "CheckpointResult",
    "CheckpointRows",
    "DEMO_CORPUS",
    "QUANTILE_DEFAULTS",
    "Runner",
    "ScoredCheckpoint",
    "SeriesState",
    "SeriesSummary",
    "SeriesTaus",
    "SeriesView",
    "TauPosition",
    "TrackRequest",
    "TrackResult",
    "apply_decisions",
    "bundled_set_names",
    "calibration_kind",
    "checkpoint_outcome",
    "common_columns",
    "compute_checkpoint",
    "confirm_transitions",
    "derive_series",
    "derive_transitions",
    "dormant_matrices",
    "failed_checkpoints",
    "fdr_rule",
    "head_histories",
    "known_commit",
    "load_calibration",
    "load_calibration_sets",
    "mark_blips",
    "open_views",
    "pending_revisions",
    "plan_series",
    "pooled_threshold",
    "predecessors",
    "reaggregate_from_input_scores",
    "record_audit",
    "record_failure",
    "rederive",
    "resolve_series_taus",
    "rows_of",
    "score_checkpoint",
    "series_state",
    "set_agreement",
    "set_aside_checkpoints",
    "set_aside_stored_duplicates",
    "shared_weights",
    "state_decisions",
    "stored_agreement",
    "stored_files",
    "stored_series",
    "tau_positions",
    "tau_warnings_of",
    "taus_checkpoint",
    "texts_calibration",
    "upgrade_store",
    "write_checkpoint",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.tracking.agreement import AGREEMENT_TABLE, set_agreement, stored_agreement
    from dormant_tasks.tracking.calibration import (
        DEMO_CORPUS,
        bundled_set_names,
        calibration_kind,
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
    from dormant_tasks.tracking.derive import SeriesSummary, derive_series, fdr_rule, rederive
    from dormant_tasks.tracking.failures import (
        CHECKPOINT_FAILURES,
        checkpoint_outcome,
        failed_checkpoints,
        record_failure,
    )
    from dormant_tasks.tracking.integrity import (
        record_audit,
        set_aside_checkpoints,
        set_aside_stored_duplicates,
        shared_weights,
    )
    from dormant_tasks.tracking.masks import QUANTILE_DEFAULTS, pooled_threshold
    from dormant_tasks.tracking.plan import SeriesState, SeriesTaus, plan_series
    from dormant_tasks.tracking.positions import TauPosition, tau_positions, tau_warnings_of
    from dormant_tasks.tracking.request import Runner, TrackRequest
    from dormant_tasks.tracking.results import CheckpointResult, common_columns, known_commit
    from dormant_tasks.tracking.series import SeriesView, open_views, stored_files, stored_series
    from dormant_tasks.tracking.series_taus import resolve_series_taus, taus_checkpoint
    from dormant_tasks.tracking.tracker import TrackResult, pending_revisions, series_state
    from dormant_tasks.tracking.transitions import (
        apply_decisions,
        confirm_transitions,
        derive_transitions,
        dormant_matrices,
        head_histories,
        mark_blips,
        predecessors,
        state_decisions,
    )
    from dormant_tasks.tracking.upgrade import upgrade_store

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "agreement": ["AGREEMENT_TABLE", "set_agreement", "stored_agreement"],
        "calibration": [
            "DEMO_CORPUS",
            "bundled_set_names",
            "calibration_kind",
            "load_calibration",
            "load_calibration_sets",
            "texts_calibration",
        ],
        "checkpoint_work": [
            "CheckpointRows",
            "ScoredCheckpoint",
            "compute_checkpoint",
            "reaggregate_from_input_scores",
            "rows_of",
            "score_checkpoint",
            "write_checkpoint",
        ],
        "derive": ["SeriesSummary", "derive_series", "fdr_rule", "rederive"],
        "failures": ["CHECKPOINT_FAILURES", "checkpoint_outcome", "failed_checkpoints", "record_failure"],
        "integrity": [
            "record_audit",
            "set_aside_checkpoints",
            "set_aside_stored_duplicates",
            "shared_weights",
        ],
        "masks": ["QUANTILE_DEFAULTS", "pooled_threshold"],
        "plan": ["SeriesState", "SeriesTaus", "plan_series"],
        "positions": ["TauPosition", "tau_positions", "tau_warnings_of"],
        "request": ["Runner", "TrackRequest"],
        "results": ["CheckpointResult", "common_columns", "known_commit"],
        "series": ["SeriesView", "open_views", "stored_files", "stored_series"],
        "series_taus": ["resolve_series_taus", "taus_checkpoint"],
        "tracker": ["TrackResult", "pending_revisions", "series_state"],
        "transitions": [
            "apply_decisions",
            "confirm_transitions",
            "derive_transitions",
            "dormant_matrices",
            "head_histories",
            "mark_blips",
            "predecessors",
            "state_decisions",
        ],
        "upgrade": ["upgrade_store"],
    },
)
