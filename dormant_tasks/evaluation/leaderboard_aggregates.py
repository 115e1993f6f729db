"""The leaderboard's rows around the cells (docs/LEADERBOARD.md): the `Average` over models, the authors' "ours",
`ours - awft` and `best`; each recomputed per redraw when the cells carry their redrawn values (`samples`), so
the interval of "ours" and "best" holds their selection.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

import numpy as np

from dormant_tasks.evaluation.leaderboard_rows import (
    AVERAGE_MODEL,
    AWFT,
    BASELINES,
    BEST,
    OURS,
    OURS_VS_AWFT,
    LeaderboardRow,
    nan_mean,
)


def _joint(rows: list[LeaderboardRow], combine) -> np.ndarray | None:
    """`combine` over the rows' redrawn values ([row, resample] -> [resample]); None unless every row has them."""
    found = [r.samples for r in rows]
    return None if not found or any(s is None for s in found) else combine(np.array(found))


def _same(values) -> int | None:
    values = set(values)
    return values.pop() if len(values) == 1 else None


def model_averages(rows: list[LeaderboardRow]) -> list[LeaderboardRow]:
    """Per (function, task): the mean over models (per redraw too: the models were redrawn on the same items)."""
    groups: dict[tuple, list[LeaderboardRow]] = defaultdict(list)
    for r in rows:
        groups[(r.score_fn, r.task)].append(r)
    return [
        LeaderboardRow(
            fn,
            AVERAGE_MODEL,
            task,
            nan_mean(r.within_1pt for r in mine),
            nan_mean(r.auc for r in mine),
            nan_mean(r.base_accuracy for r in mine),
            n_models=len(mine),
            n_items=_same(r.n_items for r in mine),
            chosen_on=mine[0].chosen_on,
            reported_on=mine[0].reported_on,
            # an average of the authors' 0s says why as they do when every model's does; else it counts them
            never_within=all(r.never_within for r in mine),
            within_throughout=all(r.within_throughout for r in mine),
            zeros_in=sum(r.zeros_counted for r in mine),
            samples=_joint(mine, lambda s: s.mean(axis=0)),
        )
        for (fn, task), mine in groups.items()
    ]


def _chosen(groups: dict[tuple, list[LeaderboardRow]], top, label: str, reported: dict | None) -> list[LeaderboardRow]:
    """Per group, the row of the function `top` picks, relabelled `label` (FN in `best_fn`): its value on the
    same items, with the group's largest value per redraw (the selection redone on each); or, with `reported`
    ((fn, model, task) -> row on other items), the chosen function's row on those."""
    out = []
    for (model, task), mine in groups.items():
        chosen = top(mine)
        if reported is None:
            row = replace(chosen, samples=_joint(mine, lambda s: s.max(axis=0)))
        elif (key := (chosen.score_fn, model, task)) in reported:
            row = reported[key]
        else:
            continue
        out.append(replace(row, score_fn=label, best_fn=chosen.score_fn))
    return out


def _keyed(cells: list[LeaderboardRow]) -> dict[tuple, LeaderboardRow]:
    return {(r.score_fn, r.model, r.task): r for r in cells}


def ours_rows(cells: list[LeaderboardRow], chosen_by: list[LeaderboardRow] | None = None) -> list[LeaderboardRow]:
    """Per (model, task): the authors' "Ours", the largest value of their notebook's functions but AWFT (random
    included, fhon/fhon_ln not), the first in that list's order among equal values (their max over their list).
    With `chosen_by` (the cells on other items), the function is chosen there and its value read in `cells`."""
    from dormant_tasks.evaluation.authors import AGGREGATE_ORDER

    groups: dict[tuple, list[LeaderboardRow]] = defaultdict(list)
    for r in chosen_by if chosen_by is not None else cells:
        if r.score_fn in AGGREGATE_ORDER and r.score_fn != AWFT:
            groups[(r.model, r.task)].append(r)

    def top(mine: list[LeaderboardRow]) -> LeaderboardRow:
        return min(mine, key=lambda r: (-r.within_1pt, AGGREGATE_ORDER.index(r.score_fn)))

    return _chosen(groups, top, OURS, _keyed(cells) if chosen_by is not None else None)


def ours_minus_awft(ours: list[LeaderboardRow], cells: list[LeaderboardRow]) -> list[LeaderboardRow]:
    """Per (model, task) with both: "Ours" minus AWFT, in points of % of heads zeroed within 1 point (per redraw
    too, both on the same redrawn items)."""
    awft = {(r.model, r.task): r for r in cells if r.score_fn == AWFT}
    return [
        replace(
            r,
            score_fn=OURS_VS_AWFT,
            within_1pt=r.within_1pt - awft[key].within_1pt,
            auc=math.nan,
            best_fn=None,
            never_within=False,
            within_throughout=False,
            zeros_in=r.zeros_counted + awft[key].zeros_counted,
            samples=_joint([r, awft[key]], lambda s: s[0] - s[1]),
        )
        for r in ours
        if (key := (r.model, r.task)) in awft
    ]


def best_rows(cells: list[LeaderboardRow], chosen_by: list[LeaderboardRow] | None = None) -> list[LeaderboardRow]:
    """Per (model, task): the function with the largest value (then the larger AUC, then the first name); with
    `chosen_by`, chosen there and its value read in `cells`."""
    groups: dict[tuple, list[LeaderboardRow]] = defaultdict(list)
    for r in chosen_by if chosen_by is not None else cells:
        if r.score_fn not in BASELINES:
            groups[(r.model, r.task)].append(r)

    def top(mine: list[LeaderboardRow]) -> LeaderboardRow:
        auc = lambda r: -math.inf if math.isnan(r.auc) else r.auc  # noqa: E731
        return min(mine, key=lambda r: (-r.within_1pt, -auc(r), r.score_fn))

    return _chosen(groups, top, BEST, _keyed(cells) if chosen_by is not None else None)
