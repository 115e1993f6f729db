"""Interventions (layer 4, above tracking): the evaluate request (`EvalRequest`) and its targets
(`resolve_targets`), the lm-eval model `DormantLM`, tasks under the paper protocol, the threshold sweep, the
metric, the stored evaluations and the leaderboard across models, the seed reproduction.
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach

__all__ = [
    "AUC_UNIT",
    "AVERAGE_TASK",
    "DEFAULT_EVAL_SCORES",
    "DEFAULT_QUANTILES",
    "EvalRequest",
    "EvalTargets",
    "ItemResampling",
    "WARNED",
    "agreement_task",
    "auc_agreement",
    "built_task_names",
    "curve_warnings",
    "done_runs",
    "evaluate_target",
    "format_leaderboard",
    "format_leaderboard_table",
    "format_seed_comparison",
    "forward_tokens",
    "load_leaderboard",
    "never_crossed",
    "normalised_auc",
    "parse_chat_date",
    "pct_zeroed_within_1pt",
    "prepare",
    "protocol_line",
    "reproduction_requests",
    "resolve_targets",
    "run_sweep",
    "seed_comparison",
    "series_evaluations",
    "within_text",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.evaluation.intervals import ItemResampling
    from dormant_tasks.evaluation.leaderboard import load_leaderboard
    from dormant_tasks.evaluation.leaderboard_table import format_leaderboard_table
    from dormant_tasks.evaluation.lm_tasks import built_task_names
    from dormant_tasks.evaluation.metric import (
        AUC_UNIT,
        AVERAGE_TASK,
        WARNED,
        curve_warnings,
        never_crossed,
        normalised_auc,
        pct_zeroed_within_1pt,
        within_text,
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

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "intervals": ["ItemResampling"],
        "leaderboard": ["load_leaderboard"],
        "leaderboard_table": ["format_leaderboard_table"],
        "lm_tasks": ["built_task_names"],
        "metric": [
            "AUC_UNIT",
            "AVERAGE_TASK",
            "WARNED",
            "curve_warnings",
            "never_crossed",
            "normalised_auc",
            "pct_zeroed_within_1pt",
            "within_text",
        ],
        "rank_agreement": ["agreement_task", "auc_agreement"],
        "reproduction": [
            "done_runs",
            "format_seed_comparison",
            "forward_tokens",
            "reproduction_requests",
            "seed_comparison",
        ],
        "request": ["DEFAULT_EVAL_SCORES", "DEFAULT_QUANTILES", "EvalRequest", "parse_chat_date"],
        "stored": ["series_evaluations"],
        "sweep": ["prepare", "protocol_line", "run_sweep"],
        "targets": ["EvalTargets", "evaluate_target", "format_leaderboard", "resolve_targets"],
    },
)
