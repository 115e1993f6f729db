"""A leaderboard row: one value of the table across models, in % (a cell, an average or an aggregate)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.engine import DETERMINISTIC_IDS, SCORE_FUNCTIONS
from dormant_tasks.evaluation.metric import AVERAGE_TASK, NEVER_WITHIN, WITHIN_THROUGHOUT

AVERAGE_MODEL = "Average"  # the mean over models
BEST = "best"  # the best function of a model, of all functions
OURS = "ours"  # the authors' aggregate: the best function but AWFT, random included
OURS_VS_AWFT = "ours - awft"  # the aggregate's lead over AWFT, in points of % zeroed
AWFT = "awft"
AGGREGATE_RANK = {OURS: 1, OURS_VS_AWFT: 2, BEST: 3}  # shown after the functions, in this order
BASELINES = frozenset(SCORE_FUNCTIONS) - frozenset(DETERMINISTIC_IDS)  # never the best function
# what makes two runs comparable; rendering, precision and threshold source are null in rows written before them
PROTOCOL = ("shots", "metric", "chat_template", "bos", "rendering", "precision", "threshold_source")


@dataclass(frozen=True)
class LeaderboardRow:
    """One value of the board, in %; the protocol fields are None on a mean over models or tasks."""

    score_fn: str  # a function id, or OURS / OURS_VS_AWFT / BEST
    model: str  # a model id, or AVERAGE_MODEL
    task: str  # an lm-eval task, or AVERAGE_TASK
    within_1pt: float  # % of heads zeroed within 1 point
    auc: float  # the sweep's normalised AUC (NaN on a difference)
    base_accuracy: float
    revision: str | None = None  # the revision the model is shown at; None on a mean over models
    best_fn: str | None = None  # the function an aggregate chose
    shots: int | None = None
    metric: str | None = None
    chat_template: bool | None = None
    bos: str | None = None
    rendering: str | None = None
    precision: str | None = None
    threshold_source: str | None = None
    n_models: int | None = None  # models behind a mean over models
    warnings: str | None = None  # the curve's warnings, "; "-joined
    never_within: bool = False  # the curve never came within 1 point: its value is the authors' 0
    within_throughout: bool = False  # the curve stayed within 1 point throughout: its value is the authors' 0
    n_items: int | None = None  # the items behind the value
    chosen_on: str | None = None  # --select-on: the items an aggregate chose its function on
    reported_on: str | None = None  # ... and the items its value is read on
    zeros_in: int = 0  # never-crossing curves a mean or a difference counts as the authors' 0
    low: float | None = None  # the 95% interval, when drawn
    high: float | None = None
    interval: str | None = None  # the interval's method
    samples: np.ndarray | None = field(default=None, repr=False, compare=False)  # [resample] value per redraw

    @property
    def never(self) -> str | None:
        """NEVER_WITHIN or WITHIN_THROUGHOUT for a curve that never crossed base - 1 point, else None."""
        return NEVER_WITHIN if self.never_within else WITHIN_THROUGHOUT if self.within_throughout else None

    @property
    def zeros_counted(self) -> int:
        """How many curves that never crossed base - 1 point put their authors' 0 into the value: 1 for such a
        curve, the count behind a mean or a difference (`zeros_in`)."""
        return 1 if self.never else self.zeros_in


def row_order(r: LeaderboardRow) -> tuple:
    return (
        AGGREGATE_RANK.get(r.score_fn, 0),
        r.score_fn,
        r.model == AVERAGE_MODEL,
        r.model,
        r.task == AVERAGE_TASK,
        r.task,
    )


def nan_mean(values) -> float:
    values = list(values)
    return float(np.mean(values)) if values else math.nan
