"""Whether the score functions rank alike across models: Spearman correlations of their AUCs on one task (the
leaderboard's agreement table, `dormant leaderboard --agreement`)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation.leaderboard_rows import AGGREGATE_RANK, AVERAGE_MODEL, LeaderboardRow
from dormant_tasks.evaluation.metric import AVERAGE_TASK


def agreement_task(rows: list[LeaderboardRow]) -> str:
    """The task `auc_agreement` ranks functions on by default: the across-task average when the board has
    one, else its only task."""
    tasks = sorted({r.task for r in rows})
    if AVERAGE_TASK in tasks:
        return AVERAGE_TASK
    if len(tasks) == 1:
        return tasks[0]
    raise ConfigError(
        f"the board has tasks {', '.join(tasks)} and no across-task average of them: name one task "
        "(`dormant leaderboard --tasks T`)"
    )


def spearman(a, b) -> float:
    """Spearman's rank correlation (scipy.stats.spearmanr: Pearson's of the average ranks, ties sharing theirs);
    NaN for fewer than 2 values or a constant side, where the correlation is undefined (scipy would warn)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    from scipy import stats

    return float(stats.spearmanr(a, b).statistic)


def auc_agreement(rows: list[LeaderboardRow], task: str | None = None) -> tuple[list[str], np.ndarray]:
    """(models, [model, model] Spearman correlation of the functions' AUCs on `task`), over the functions that
    both models have with a finite AUC; NaN where fewer than 2 are shared (the authors' agreement analysis:
    do models rank the score functions alike?). `task`: default `agreement_task(rows)`."""
    task = agreement_task(rows) if task is None else task
    auc: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        if r.task == task and r.model != AVERAGE_MODEL and r.score_fn not in AGGREGATE_RANK and not math.isnan(r.auc):
            auc[r.model][r.score_fn] = r.auc
    models = sorted(auc)
    matrix = np.full((len(models), len(models)), np.nan)  # [model, model]
    for i, a in enumerate(models):
        for j in range(i, len(models)):
            shared = sorted(set(auc[a]) & set(auc[models[j]]))
            rho = spearman([auc[a][f] for f in shared], [auc[models[j]][f] for f in shared])
            matrix[i, j] = matrix[j, i] = rho
    return models, matrix
