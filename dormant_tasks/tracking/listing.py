"""The series' listing, in the store (docs/DATA_CONTRACT.md "listed_checkpoints"): every checkpoint the source
listed when a track run planned, scored or not, recorded by `record_listing` once the plan is made. It is what
lets a reader say how finely a change is located: a transition lies between two scored checkpoints, and the
listing says how many checkpoints a run could have scored between them (`Resolution.unscored_between`: 0, the
change is resolved to adjacent checkpoints; 3, "between 117B and 264B tokens: 3 checkpoints unscored"), whether the
run scored every checkpoint, a `--max` or `--every` grid, or a `--budget` search. A store tracked before the
listing was kept says "unknown" (`Resolution.known` is False), never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from dormant_tasks.store import Table, is_store, read_table, series_lock, write_table
from dormant_tasks.tracking.results import common_columns

LISTING_KEY = "listing"  # file key of a series' one listed_checkpoints file
_SAME = ("revision", "stage", "step", "tokens", "ingredient", "available")  # what a rewrite compares


def listed_checkpoints(store, model_id: str) -> list[dict] | None:
    """The series' listing as last recorded, in series order; None when none was recorded (a store tracked before
    the listing was kept, or no store): how many checkpoints lie unscored between two is then unknown."""
    from dormant_tasks.tracking.series import checkpoint_sort_key

    if not is_store(store):
        return None
    rows = read_table(store, Table.listed_checkpoints, model_id=model_id).to_pylist()
    return sorted(rows, key=checkpoint_sort_key) if rows else None


def record_listing(store, model_id: str, plan, request_id: str | None = None) -> bool:
    """Record the series' listing as this run's plan saw it (`SeriesPlan.listed`: `main` only when the run includes
    it), replacing the one recorded before; a branch the integrity audit set aside or refused is listed with
    `available` false (not a point of training a run would score). Nothing is written when the recorded listing
    says the same already. Returns whether it wrote."""
    dropped = set(plan.set_aside) | set(plan.refused)
    now = datetime.now(UTC)
    rows = [
        {
            **common_columns(model_id, r),
            "ingredient": r.ingredient,
            "available": r.name not in dropped,
            "listed_at": now,
            "request_id": request_id,
        }
        for r in plan.listed
    ]
    with series_lock(store, model_id):
        before = listed_checkpoints(store, model_id) or []
        if _same(before) == _same(rows):
            return False
        write_table(store, Table.listed_checkpoints, rows, file_key=LISTING_KEY, model_id=model_id)
    return True


def _same(rows: Iterable[dict]) -> list[tuple]:
    return sorted(tuple(r[c] for c in _SAME) for r in rows)


@dataclass(frozen=True)
class Resolution:
    """How finely the scored checkpoints of a series resolve a change: built once per series from its listing and
    the revisions it holds scored (`of`). Without a recorded listing every answer is None ("unknown")."""

    known: bool
    revisions: tuple[str, ...] = ()  # the listing in series order
    predecessor: tuple[int, ...] = ()  # [listed] its predecessor in the listing's branch tree (-1: none)
    unscored: tuple[bool, ...] = ()  # [listed] available to score and not scored

    @classmethod
    def of(cls, listing: list[dict] | None, scored: Iterable[str]) -> Resolution:
        """`listing`: `listed_checkpoints` rows (series order; None: unknown); `scored`: the revisions the series'
        findings read (its current checkpoints)."""
        from dormant_tasks.tracking.transitions import predecessors

        if listing is None:
            return cls(False)
        done = set(scored)
        stage = np.array([r["stage"] for r in listing], dtype=np.int64)
        ingredient = np.array([r["ingredient"] or 0 for r in listing], dtype=np.int64)
        return cls(
            True,
            tuple(r["revision"] for r in listing),
            tuple(int(p) for p in predecessors(stage, ingredient)),
            tuple(bool(r["available"]) and r["revision"] not in done for r in listing),
        )

    def unscored_between(self, earlier: str, later: str) -> int | None:
        """How many listed checkpoints, available and not scored, lie strictly between two scored ones on the path
        of training (the listing's branch tree); 0: the change between them is resolved to adjacent checkpoints.
        None: unknown (no listing recorded, or a revision the listing lacks or whose path does not pass the other)."""
        if not self.known:
            return None
        index = {r: i for i, r in enumerate(self.revisions)}
        if earlier not in index or later not in index:
            return None
        target, c, n = index[earlier], self.predecessor[index[later]], 0
        while c >= 0 and c != target:
            n += self.unscored[c]
            c = self.predecessor[c]
        return n if c == target else None


def series_resolution(store, model_id: str, scored: Iterable[str]) -> Resolution:
    """The `Resolution` of a stored series whose current checkpoints are `scored`."""
    return Resolution.of(listed_checkpoints(store, model_id), scored)
