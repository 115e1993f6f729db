"""Whether the score functions rank alike across models: Spearman correlations of their AUCs on one task (the
leaderboard's agreement table, `dormant leaderboard --agreement`)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation.leaderboard import _AGGREGATE_RANK, AVERAGE_MODEL
from dormant_tasks.evaluation.metric import (
    AVERAGE_TASK,
)


def agreement_task(rows: list[dict]) -> str:
    """The task `auc_agreement` ranks functions on by default: the across-task average when the board has
    one, else its only task."""
    tasks = sorted({r["task"] for r in rows})
    if AVERAGE_TASK in tasks:
        return AVERAGE_TASK
    if len(tasks) == 1:
        return tasks[0]
    raise ConfigError(
        f"the board has tasks {', '.join(tasks)} and no across-task average of them: name one task "
        "(`dormant leaderboard --tasks T`)"
    )


def average_ranks(x) -> np.ndarray:
    """1-based ranks of x, ties given the mean of their ranks (as scipy.stats.rankdata's "average")."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])  # [group] first index of each tie group
    ends = np.r_[starts[1:], len(x)]
    ranks = np.empty(len(x))
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)  # mean of ranks starts+1 .. ends
    return ranks


def spearman(a, b) -> float:
    """Spearman's rank correlation: Pearson's of the average ranks; NaN for < 2 values or constant ranks."""
    if len(a) < 2:
        return math.nan
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return math.nan if denominator == 0 else float(ra @ rb) / denominator


def auc_agreement(rows: list[dict], task: str | None = None) -> tuple[list[str], np.ndarray]:
    """(models, [model, model] Spearman correlation of the functions' AUCs on `task`), over the functions that
    both models have with a finite AUC; NaN where fewer than 2 are shared (the authors' agreement analysis:
    do models rank the score functions alike?). `task`: default `agreement_task(rows)`."""
    task = agreement_task(rows) if task is None else task
    auc: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        if (
            r["task"] == task
            and r["model"] != AVERAGE_MODEL
            and r["score_fn"] not in _AGGREGATE_RANK
            and not math.isnan(r["auc"])
        ):
            auc[r["model"]][r["score_fn"]] = r["auc"]
    models = sorted(auc)
    matrix = np.full((len(models), len(models)), np.nan)  # [model, model]
    for i, a in enumerate(models):
        for j in range(i, len(models)):
            shared = sorted(set(auc[a]) & set(auc[models[j]]))
            rho = spearman([auc[a][f] for f in shared], [auc[models[j]][f] for f in shared])
            matrix[i, j] = matrix[j, i] = rho
    return models, matrix
