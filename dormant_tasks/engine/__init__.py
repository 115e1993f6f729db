"""The score engine: every score function of every head in one forward pass (`score_texts`, `scoring_pass`), with
heads zeroed dynamically (`DynamicZeroing`) or statically (`StaticZeroing`), and the one batch builder. Layer 2:
it uses only the shared leaves (errors, progress), never another part.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.engine.adapters import layer_windows as layer_windows
    from dormant_tasks.engine.attention import DynamicZeroing as DynamicZeroing, StaticZeroing as StaticZeroing
    from dormant_tasks.engine.batching import (
        batch_runs as batch_runs,
        device_batching as device_batching,
        padded_batch as padded_batch,
    )
    from dormant_tasks.engine.options import ScoringOptions as ScoringOptions
    from dormant_tasks.engine.roles import (
        ROLES as ROLES,
        ROLE_THRESHOLD as ROLE_THRESHOLD,
        UNDEFINED as UNDEFINED,
        HeadRoles as HeadRoles,
        head_roles as head_roles,
    )
    from dormant_tasks.engine.score_functions import (
        ALL_IDS as ALL_IDS,
        DEFAULT_FN as DEFAULT_FN,
        DETERMINISTIC_IDS as DETERMINISTIC_IDS,
        DORMANT_RULE as DORMANT_RULE,
        ROLE_CLASSES as ROLE_CLASSES,
        ROLE_IDS as ROLE_IDS,
        SCORE_FUNCTIONS as SCORE_FUNCTIONS,
        SCORING_VERSION as SCORING_VERSION,
        TRACKED_IDS as TRACKED_IDS,
        get_score_function as get_score_function,
        is_inactive as is_inactive,
        parse_score_functions as parse_score_functions,
    )
    from dormant_tasks.engine.scoring import (
        InputScores as InputScores,
        score_ids as score_ids,
        score_texts as score_texts,
        scoring_pass as scoring_pass,
    )

__all__, __getattr__, __dir__ = attach(__name__)
