"""Interventions (layer 4, above tracking): the evaluate request (`EvalRequest`) and its targets
(`resolve_targets`), the lm-eval model `DormantLM`, tasks under the paper protocol, the threshold sweep, the
metric, the stored evaluations and the leaderboard across models, the seed reproduction.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import lazy_face

if TYPE_CHECKING:  # the public names, imported on first use (`dormant_tasks.face`)
    from dormant_tasks.evaluation.leaderboard import format_leaderboard_table, load_leaderboard
    from dormant_tasks.evaluation.lm_tasks import built_task_names
    from dormant_tasks.evaluation.metric import (
        AUC_UNIT,
        AVERAGE_TASK,
        WARNED,
        curve_warnings,
        normalised_auc,
        pct_zeroed_within_1pt,
    )
    from dormant_tasks.evaluation.rank_agreement import agreement_task, auc_agreement
    from dormant_tasks.evaluation.reproduction import (
        done_runs,
        format_seed_comparison,
        forward_tokens,
        reproduction_requests,
        seed_comparison,
    )
    from dormant_tasks.evaluation.request import DEFAULT_EVAL_SCORES, DEFAULT_QUANTILES, EvalRequest, parse_chat_date
    from dormant_tasks.evaluation.stored import series_evaluations
    from dormant_tasks.evaluation.sweep import prepare, protocol_line, run_sweep
    from dormant_tasks.evaluation.targets import EvalTargets, evaluate_target, format_leaderboard, resolve_targets

__getattr__, __dir__, __all__ = lazy_face(__name__)
