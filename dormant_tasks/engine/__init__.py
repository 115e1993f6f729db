"""The score engine: every score function of every head in one forward pass (`score_texts`, `scoring_pass`), with
heads zeroed dynamically (`DynamicZeroing`) or statically (`StaticZeroing`), and the one batch builder. Layer 2:
it uses only the shared leaves (errors, progress), never another part.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import lazy_face

if TYPE_CHECKING:  # the public names, imported on first use (`dormant_tasks.face`)
    from dormant_tasks.engine.attention import DynamicZeroing, StaticZeroing
    from dormant_tasks.engine.batching import batch_runs, device_batching, padded_batch
    from dormant_tasks.engine.score_functions import (
        ALL_IDS,
        DETERMINISTIC_IDS,
        SCORE_FUNCTIONS,
        SCORING_VERSION,
        get_score_function,
        is_inactive,
        parse_score_functions,
    )
    from dormant_tasks.engine.scoring import InputScores, score_texts, scoring_pass

__getattr__, __dir__, __all__ = lazy_face(__name__)
