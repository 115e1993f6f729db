"""The score engine: every score function of every head in one forward pass (`score_texts`, `scoring_pass`), with
heads zeroed dynamically (`DynamicZeroing`) or statically (`StaticZeroing`), and the one batch builder. Layer 2:
it uses only the shared leaves (errors, progress), never another part.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "ALL_IDS",
    "DEFAULT_FN",
    "DETERMINISTIC_IDS",
    "DynamicZeroing",
    "InputScores",
    "SCORE_FUNCTIONS",
    "SCORING_VERSION",
    "ScoringOptions",
    "StaticZeroing",
    "TRACKED_IDS",
    "batch_runs",
    "device_batching",
    "get_score_function",
    "is_inactive",
    "layer_windows",
    "padded_batch",
    "parse_score_functions",
    "score_texts",
    "scoring_pass",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.engine.adapters import layer_windows
    from dormant_tasks.engine.attention import DynamicZeroing, StaticZeroing
    from dormant_tasks.engine.batching import batch_runs, device_batching, padded_batch
    from dormant_tasks.engine.score_functions import (
        ALL_IDS,
        DEFAULT_FN,
        DETERMINISTIC_IDS,
        SCORE_FUNCTIONS,
        SCORING_VERSION,
        TRACKED_IDS,
        get_score_function,
        is_inactive,
        parse_score_functions,
    )
    from dormant_tasks.engine.scoring import InputScores, ScoringOptions, score_texts, scoring_pass

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "adapters": ["layer_windows"],
        "attention": ["DynamicZeroing", "StaticZeroing"],
        "batching": ["batch_runs", "device_batching", "padded_batch"],
        "score_functions": [
            "ALL_IDS",
            "DEFAULT_FN",
            "DETERMINISTIC_IDS",
            "SCORE_FUNCTIONS",
            "SCORING_VERSION",
            "TRACKED_IDS",
            "get_score_function",
            "is_inactive",
            "parse_score_functions",
        ],
        "scoring": ["InputScores", "ScoringOptions", "score_texts", "scoring_pass"],
    },
)
