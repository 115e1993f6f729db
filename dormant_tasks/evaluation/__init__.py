"""Interventions (layer 4, above tracking): the evaluate request (`EvalRequest`) and its targets
(`resolve_targets`), the lm-eval model `DormantLM`, tasks under the paper protocol, the threshold sweep, the
metric, the stored evaluations and the leaderboard across models, the seed reproduction.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.evaluation.intervals import ItemResampling as ItemResampling
    from dormant_tasks.evaluation.leaderboard import load_leaderboard as load_leaderboard
    from dormant_tasks.evaluation.leaderboard_table import format_leaderboard_table as format_leaderboard_table
    from dormant_tasks.evaluation.lm_tasks import built_task_names as built_task_names
    from dormant_tasks.evaluation.metric import (
        AUC_UNIT as AUC_UNIT,
        AVERAGE_TASK as AVERAGE_TASK,
        WARNED as WARNED,
        curve_warnings as curve_warnings,
        never_crossed as never_crossed,
        normalised_auc as normalised_auc,
        pct_zeroed_within_1pt as pct_zeroed_within_1pt,
        within_text as within_text,
    )
    from dormant_tasks.evaluation.rank_agreement import agreement_task as agreement_task, auc_agreement as auc_agreement
    from dormant_tasks.evaluation.reproduction import (
        done_runs as done_runs,
        format_seed_comparison as format_seed_comparison,
        forward_tokens as forward_tokens,
        reproduction_requests as reproduction_requests,
        seed_comparison as seed_comparison,
    )
    from dormant_tasks.evaluation.request import (
        DEFAULT_EVAL_SCORES as DEFAULT_EVAL_SCORES,
        DEFAULT_QUANTILES as DEFAULT_QUANTILES,
        EvalRequest as EvalRequest,
        parse_chat_date as parse_chat_date,
    )
    from dormant_tasks.evaluation.stored import series_evaluations as series_evaluations
    from dormant_tasks.evaluation.sweep import (
        prepare as prepare,
        protocol_line as protocol_line,
        run_sweep as run_sweep,
    )
    from dormant_tasks.evaluation.targets import (
        EvalTargets as EvalTargets,
        evaluate_target as evaluate_target,
        format_leaderboard as format_leaderboard,
        resolve_targets as resolve_targets,
    )

__all__, __getattr__, __dir__ = attach(__name__)
