"""The uncertainty of the leaderboard's values: a paired bootstrap over items (docs/SCORES.md §6, "How sure is a
leaderboard value").

A value ("% of heads zeroed within 1 point") is a function of accuracies measured on the same items: the base
run's and each threshold's. On 400 items one accuracy has a binomial standard error of about 1.2 points, more
than the 1-point tolerance that defines the value, so the value moves a lot with the items drawn. The bootstrap
redraws the items with replacement and recomputes the value from the redrawn items' outcomes
(`evaluation_items.correct`, stored by `dormant evaluate --log-samples`):

- **paired**: one redraw of the items serves the base run and every threshold of a curve (the difference
  base - accuracy is what the metric reads), every function and every model evaluated on those items, so the
  average over models, the best function and "ours - awft" are recomputed on each redraw from the same items;
- **unit**: an item (lm-eval's `doc_id`), redrawn within its lm-eval leaf task (an MMLU subject keeps its size,
  so the group's size-weighted accuracy keeps its weights). WinoGrande's twin sentences are not identified in
  lm-eval's dataset (no `qID`; 481 of the 1,267 dev items share their option pair with no other item), so
  they are redrawn one by one: twins that agree make the interval somewhat narrow;
- **held fixed**: the measured % of heads zeroed at each threshold (a mean over every layer, head and row of
  the run, far steadier than an accuracy) and the thresholds themselves;
- the interval is the 2.5 and 97.5 percentiles of the redrawn values (`statistics.bootstrap_interval`). No null
  is tested: the interval says how far the value could move with other items of the same kind.

Public API
- `CurveItems`: the per-item outcomes behind one curve; `.subset(keep)`, `.accuracies(weights)`
- `curve_items(items, curves, tasks_of_run) -> ({key: CurveItems}, notes)`: read from `evaluation_items` rows
- `ItemResampling(resamples, seed)`: `.weights(items)` the redraw counts, one stream per leaf task
- `select_half(keys, half)`: the items of the even or odd `doc_id`s (`--select-on`)
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.statistics import RESAMPLES, SEED

METHOD = "paired bootstrap over items"
HALVES = ("even", "odd")  # --select-on: choose on these doc_ids, report on the others
_EXACT = 1e-9  # the items' accuracy and the stored one agree to float rounding, or the items are not the run's


def method_text(resamples: int, seed: int) -> str:
    """The interval's name, as every view prints it."""
    return f"{METHOD}, {resamples} resamples, seed {seed}"


@dataclass(frozen=True)
class CurveItems:
    """The items behind one curve of one run: the base run's outcome and each threshold's, item by item."""

    keys: tuple[tuple[str, int], ...]  # [item] (leaf task, doc_id), sorted
    base: np.ndarray  # [item] bool: the un-intervened run answered correctly
    correct: np.ndarray  # [point, item] bool, points in the curve's quantile order

    def subset(self, keep: np.ndarray) -> CurveItems:
        """Only the items where `keep` [item] is True."""
        return CurveItems(tuple(k for k, ok in zip(self.keys, keep) if ok), self.base[keep], self.correct[:, keep])

    def accuracies(self, weights: dict[str, tuple[dict[int, int], np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """(base [resample], accuracy [resample, point]) in %, each item counted as often as the redraw drew it;
        `weights`: leaf task -> (doc_id -> column, counts [resample, doc]) of `ItemResampling.weights`."""
        leaves = np.array([leaf for leaf, _ in self.keys])
        n = next(iter(weights.values()))[1].shape[0] if weights else 0
        total = np.zeros(n)  # [resample]
        base = np.zeros(n)  # [resample]
        hits = np.zeros((n, self.correct.shape[0]))  # [resample, point]
        for leaf in dict.fromkeys(leaves):
            mine = np.flatnonzero(leaves == leaf)  # [item] of this leaf
            column, counts = weights[leaf]
            w = counts[:, [column[self.keys[i][1]] for i in mine]].astype(np.float64)  # [resample, item]
            total += w.sum(axis=1)
            base += w @ self.base[mine]
            hits += w @ self.correct[:, mine].T
        with np.errstate(divide="ignore", invalid="ignore"):  # NaN: a redraw without any of these items
            return 100.0 * base / total, 100.0 * hits / total[:, None]


@dataclass
class ItemResampling:
    """The redraws of the items, shared by every curve on the same items (the pairing): per leaf task, counts
    [resample, doc] of a multinomial draw of its docs, from its own stream (the seed and the leaf's name), so a
    leaf's redraws do not depend on which other tasks the board holds."""

    resamples: int = RESAMPLES
    seed: int = SEED
    _drawn: dict = field(default_factory=dict)

    @property
    def method(self) -> str:
        return method_text(self.resamples, self.seed)

    def weights(self, items: list[CurveItems]) -> dict[str, tuple[dict[int, int], np.ndarray]]:
        """leaf -> (doc_id -> column, counts [resample, doc]) over every doc of the leaf any of `items` holds."""
        docs: dict[str, set[int]] = {}
        for c in items:
            for leaf, doc in c.keys:
                docs.setdefault(leaf, set()).add(doc)
        out = {}
        for leaf, found in docs.items():
            universe = tuple(sorted(found))
            if (leaf, universe) not in self._drawn:
                self._drawn[(leaf, universe)] = self._draw(leaf, len(universe))
            out[leaf] = ({d: i for i, d in enumerate(universe)}, self._drawn[(leaf, universe)])
        return out

    def _draw(self, leaf: str, n: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(leaf.encode())])
        drawn = rng.integers(0, n, size=(self.resamples, n))  # [resample, draw] the doc drawn
        flat = (drawn + n * np.arange(self.resamples)[:, None]).ravel()
        return np.bincount(flat, minlength=self.resamples * n).reshape(self.resamples, n).astype(np.uint16)


def select_half(keys, half: str) -> np.ndarray:
    """[item] True for the items of `half` ("even" or "odd" doc_id)."""
    parity = HALVES.index(half)
    return np.array([doc % 2 == parity for _, doc in keys], dtype=bool)


def leaf_task(leaf: str, tasks) -> str | None:
    """The requested task a leaf belongs to: itself, else the longest task named as its prefix (mmlu_anatomy ->
    mmlu), as lm-eval names a group's leaves; None when none is."""
    if leaf in tasks:
        return leaf
    owners = [t for t in tasks if leaf.startswith(f"{t}_")]
    return max(owners, key=len) if owners else None


def curve_items(items: list[dict], curves: dict, tasks_of_run: dict) -> tuple[dict[tuple, CurveItems], list[str]]:
    """The items behind each curve: `curves` maps (fn, model, task) -> (revision, request_id, quantiles, points,
    base %); `items` are `evaluation_items` rows; `tasks_of_run` maps a request_id to the tasks it evaluated. A
    curve whose run stored no items gets none; one whose items do not give its stored accuracies (another
    run's, or incomplete) gets none and a note."""
    wanted = {(model, rev, rid) for (_, model, _), (rev, rid, *_) in curves.items() if rid is not None}
    outcomes: dict[tuple, dict] = {}  # (model, revision, rid, task, fn, quantile) -> {(leaf, doc): correct}
    for r in items:
        key = (r["model_id"], r["revision"], r["request_id"])
        if key not in wanted:
            continue
        task = leaf_task(r["task"], tasks_of_run.get(r["request_id"], ()))
        if task is None:
            continue
        setting = (*key, task, r["score_fn"], r["quantile"] if r["score_fn"] is not None else None)
        outcomes.setdefault(setting, {})[(r["task"], int(r["doc_id"]))] = bool(r["correct"])
    out: dict[tuple, CurveItems] = {}
    notes = []
    for (fn, model, task), (rev, rid, quantiles, points, base) in curves.items():
        base_items = outcomes.get((model, rev, rid, task, None, None))
        by_q = [found for q in quantiles if (found := outcomes.get((model, rev, rid, task, fn, q))) is not None]
        if base_items is None or len(by_q) < len(quantiles):
            continue
        keys = tuple(sorted(base_items))
        if any(set(q) != set(keys) for q in by_q):
            notes.append(f"{model} {task} {fn}: its stored items differ between settings; no interval")
            continue
        c = CurveItems(
            keys,
            np.array([base_items[k] for k in keys], dtype=np.bool_),
            np.array([[q[k] for k in keys] for q in by_q], dtype=np.bool_).reshape(len(by_q), len(keys)),
        )
        measured = (100.0 * c.base.mean(), 100.0 * c.correct.mean(axis=1))
        stored = (base, np.array([y for _, y in points]))
        if abs(measured[0] - stored[0]) > 100 * _EXACT or not np.allclose(measured[1], stored[1], atol=100 * _EXACT):
            notes.append(f"{model} {task} {fn}: its stored items do not give its stored accuracies; no interval")
            continue
        out[(fn, model, task)] = c
    return out, notes
