"""How sure a leaderboard value is: a paired bootstrap over items, redrawn within each lm-eval leaf task, the % of
heads zeroed and the thresholds held fixed (docs/SCORES.md §6, "How sure a leaderboard value is"); and
`--select-on`'s halves, whole clusters on one side (WinoGrande's twins; any other task's items by `doc_id`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np

from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation.leaderboard_aggregates import best_rows, ours_rows
from dormant_tasks.evaluation.leaderboard_curves import CurveKey, SweepCurve, curve_row, names_text, task_averages
from dormant_tasks.evaluation.leaderboard_rows import LeaderboardRow
from dormant_tasks.statistics import RESAMPLES, SEED

METHOD = "paired bootstrap over items"
HALVES = ("even", "odd")  # --select-on: choose on the items of these clusters, report on the others
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


@cache
def _known_clusters(leaf: str) -> tuple[int, ...] | None:
    """Per doc_id, its cluster, for a leaf task whose clusters are known: WinoGrande's twin pairs as the
    calibration set finds them (`tracking.winogrande_calibration`: the bundled dev file is lm-eval's winogrande
    validation split, item for item, in doc_id order). None for any other task."""
    if leaf != "winogrande":
        return None
    from dormant_tasks.tracking import winogrande_calibration

    return winogrande_calibration(limit=None).clusters


def item_clusters(keys) -> list[tuple[str, int]]:
    """Per item (leaf task, doc_id), its cluster (leaf task, number): WinoGrande's twins share one; an item of a
    task without known clusters (or a doc_id past them) is its own cluster, numbered by its doc_id."""
    out = []
    for leaf, doc in keys:
        clusters = _known_clusters(leaf)
        out.append((leaf, clusters[doc] if clusters is not None and doc < len(clusters) else doc))
    return out


def select_half(keys, half: str) -> np.ndarray:
    """[item] True for the items of `half` ("even" or "odd"): the items whose cluster (`item_clusters`) has that
    parity, so the two halves never split a cluster (WinoGrande's twins stay together; by doc_id parity every
    pair would be split, and the halves would not be independent)."""
    parity = HALVES.index(half)
    return np.array([cluster % 2 == parity for _, cluster in item_clusters(keys)], dtype=bool)


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


def items_behind(
    curves: dict[CurveKey, SweepCurve],
    rows: list[dict],
    items: list[dict] | None,
    resampling: ItemResampling | None,
    notes: list[str],
) -> tuple[dict[CurveKey, CurveItems], dict | None]:
    """The items behind each of the board's curves (`curve_items`; `rows` are the board's `evaluations` rows,
    `items` its `evaluation_items` rows, None: not read) and the redraws shared by all of them (None: none)."""
    if items is None:
        return {}, None
    tasks_of_run: dict = {}
    for r in rows:
        tasks_of_run.setdefault(r["request_id"], set()).add(r["task"])
    wanted = {key: (c.revision, c.request_id, c.quantiles, c.points, c.base) for key, c in curves.items()}
    found, found_notes = curve_items(items, wanted, tasks_of_run)
    notes += found_notes
    lacking = {f"{m} {task}" for (_, m, task) in curves.keys() - found.keys()}
    if not found:
        notes.append("no intervals: no shown run stored its items (evaluate with --log-samples)")
    elif lacking:
        notes.append(f"no interval for {names_text(lacking)}: their runs stored no items (evaluate with --log-samples)")
    weights = resampling.weights(list(found.values())) if resampling is not None and found else None
    return found, weights


def _half_curve(c: SweepCurve, mine: CurveItems) -> SweepCurve:
    """The curve measured on a subset of its items (`mine`); the % zeroed at each threshold held fixed."""
    x = [px for px, _ in c.points]
    ys = 100.0 * mine.correct.mean(axis=1) if mine.keys else np.full(len(x), np.nan)
    return replace(c, points=tuple(zip(x, ys.tolist())), base=100.0 * mine.base.mean(), n_items=len(mine.keys))


def _half_rows(
    curves: dict[CurveKey, SweepCurve],
    found: dict[CurveKey, CurveItems],
    weights: dict | None,
    revisions: dict[str, str],
    half: str,
) -> list[LeaderboardRow]:
    """The cells and across-task averages of the curves that have items, measured on the items of `half`."""
    half_curves, half_samples = {}, {}
    for key, c in found.items():
        mine = c.subset(select_half(c.keys, half))
        half_curves[key] = _half_curve(curves[key], mine)
        if weights:
            half_samples[key] = mine.accuracies(weights)
    cells = [curve_row(key, revisions[key[1]], c, half_samples.get(key)) for key, c in half_curves.items()]
    return cells + task_averages(half_curves, revisions, [], half_samples)


def chosen_elsewhere(
    curves: dict[CurveKey, SweepCurve],
    found: dict[CurveKey, CurveItems],
    weights: dict | None,
    revisions: dict[str, str],
    select_on: str,
    notes: list[str],
) -> tuple[list[LeaderboardRow], list[LeaderboardRow], list[LeaderboardRow]]:
    """ "ours" and "best" chosen on the items of the `select_on` half (`select_half`), reported on the others:
    (ours, best, the cells on the reporting items)."""
    if not found:
        raise ConfigError(
            "--select-on needs the items behind the curves, and no shown run stored them: evaluate with --log-samples"
        )
    report_on = HALVES[1 - HALVES.index(select_on)]
    chosen_by = _half_rows(curves, found, weights, revisions, select_on)
    reported = _half_rows(curves, found, weights, revisions, report_on)

    def where(rows: list[LeaderboardRow]) -> list[LeaderboardRow]:
        return [replace(r, chosen_on=f"{select_on} items", reported_on=f"{report_on} items") for r in rows]

    if len(found) < len(curves):
        notes.append("ours and best of all functions: only the curves whose runs stored their items can be chosen")
    return (
        where(ours_rows(reported, chosen_by=chosen_by)),
        where(best_rows(reported, chosen_by=chosen_by)),
        where(reported),
    )
