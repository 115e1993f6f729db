"""The Python API: a store's results as pandas DataFrames, for notebooks and scripts.

    import dormant_tasks
    store = dormant_tasks.open_store("data/store")
    store.series()                      # ['tiny-olmo2', ...]
    s = store["tiny-olmo2"]             # one tracked series, on its primary calibration set
    s.checkpoints()                     # one row per current checkpoint, in series order
    s.masks("ahon_ln")                  # bool, one row per checkpoint, one column per (layer, head)
    s.scores(), s.transitions(), s.histories(), s.findings(), s.evaluations()

Everything is read through `SeriesView` (tracking/series.py), the one reader of what is current in a series:
the rows of the series' current taus and calibration set, by the current scoring version, checkpoints in series
order. The API only reads; `dormant track`, `dormant evaluate` write. No torch is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from dormant_tasks import store
from dormant_tasks.tracking import SeriesView


def _frame(table: pa.Table) -> pd.DataFrame:
    """A DataFrame with nullable integer columns kept as integers (int64 with nulls would become float)."""
    return table.to_pandas(types_mapper={pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}.get)


@dataclass(frozen=True)
class Store:
    """A dormant-heads store (the folder `dormant track --store` wrote), opened read-only."""

    path: Path

    def series(self) -> list[str]:
        """The model ids of the series the store holds, tracked or only evaluated."""
        return store.list_models(self.path)

    def __getitem__(self, model_id: str) -> SeriesResults:
        return self.open_series(model_id)

    def open_series(self, model_id: str, calibration_id: str | None = None) -> SeriesResults:
        """One tracked series on one calibration set (default: its primary set). StoreError, naming what the
        store holds, when it was never tracked."""
        return SeriesResults(SeriesView.open(self.path, model_id, calibration_id))

    def calibration_ids(self, model_id: str) -> list[str]:
        """The series' calibration sets, the primary one first."""
        return SeriesView.calibration_ids(self.path, model_id)

    def evaluations(self, model_id: str | None = None) -> pd.DataFrame:
        """The `evaluations` table (docs/DATA_CONTRACT.md), of one series or all; evaluated series need not be
        tracked."""
        return _frame(store.read_table(self.path, "evaluations", model_id=model_id))


def open_store(path) -> Store:
    """Open the store at `path` (a StoreError, with the fix, when it is not one): a folder, or a series published on
    the Hub, `hf://datasets/ORG/NAME` (fetched once into a cached, read-only copy: docs/PUBLISHING.md)."""
    from dormant_tasks.publishing import open_published

    return Store(store.store_folder(open_published(path)))


@dataclass(frozen=True)
class SeriesResults:
    """The current results of one tracked series on one calibration set. `view` is the underlying SeriesView."""

    view: SeriesView

    @property
    def model_id(self) -> str:
        return self.view.model_id

    @property
    def calibration_id(self) -> str:
        return self.view.calibration_id

    @property
    def score_fns(self) -> list[str]:
        """The tracked score functions."""
        return list(self.view.taus)

    @property
    def revisions(self) -> list[str]:
        """The current checkpoints, in series order."""
        return self.view.revisions

    def taus(self) -> pd.DataFrame:
        """One row per score function: its tau, direction, source ("fixed" or "quantile"), the quantile and the
        reference checkpoint it came from."""
        rows = [t.row() for t in self.view.taus.values()]
        return pd.DataFrame(rows)

    def checkpoints(self) -> pd.DataFrame:
        """The manifest rows of the current checkpoints, in series order."""
        return _frame(self.view.checkpoints_table())

    def scores(self, score_fns=None) -> pd.DataFrame:
        """head_scores: one row per (checkpoint, score function, layer, head) with its score, tau and `dormant`."""
        return _frame(self.view.head_scores(_listed(score_fns)))

    def masks(self, score_fn: str) -> pd.DataFrame:
        """The dormancy masks of `score_fn`: bool, index the revisions in series order, columns (layer, head)."""
        if score_fn not in self.view.taus:
            self.view.mask(self.revisions[0], score_fn)  # the StoreError naming the tracked functions
        t = self.view.head_scores([score_fn], columns=["revision", "layer", "head_index", "dormant"])
        wide = t.to_pandas().pivot(index="revision", columns=["layer", "head_index"], values="dormant")
        return wide.reindex(self.revisions).sort_index(axis=1).astype(bool)

    def mask(self, revision: str, score_fn: str) -> frozenset[tuple[int, int]]:
        """The dormant (layer, head) pairs of `score_fn` at one checkpoint."""
        return self.view.mask(revision, score_fn)[0]

    def transitions(self, score_fns=None) -> pd.DataFrame:
        """The stored transitions (a head changing state between consecutive checkpoints), with `confident`
        and `blip`."""
        return _frame(self.view.transitions(_listed(score_fns)))

    def histories(self, score_fns=None) -> pd.DataFrame:
        """One row per (score function, head): when it first fell dormant, how often it changed, its final state."""
        return _frame(self.view.histories(_listed(score_fns)))

    def findings(self, score_fn: str | None = None) -> pd.DataFrame:
        """The paper's three findings (docs/SCORES.md), one row per measured quantity: `finding`, `quantity`,
        `value`, its 95% interval `low`/`high` (NaN where none), and `k` of `n` for shares. The full objects:
        `findings_object`."""
        f = self.findings_object(score_fn)
        e, t, d = f.emergence, f.transitions, f.input_dependence
        rows = [
            _row("emergence", "% dormant at the first checkpoint", e.pct_dormant_first),
            _row("emergence", "% dormant at the last checkpoint", e.pct_dormant_last),
            _row("emergence", "heads settled dormant", len(e.heads)),
            _row("emergence", "heads right-censored (not settled by the end)", e.n_censored),
            _row("emergence", "settling time, median over every head (tokens)", e.settled_median_all),
            _row(
                "emergence",
                "first dormant, median over settled heads (fraction of the series' tokens)",
                e.first_fraction,
            ),
            _row(
                "emergence", "settled, median over settled heads (fraction of the series' tokens)", e.settled_fraction
            ),
            _row("emergence", "settled heads settled early", e.early),
            _row("transitions", "mask changes", t.n_transitions),
            _row("transitions", "confident transitions", t.n_confident),
            _row(  # NaN: the store keeps no listing of the series (unknown)
                "transitions",
                "confident transitions resolved to adjacent checkpoints",
                t.resolution.n_resolved if t.resolution is not None and t.resolution.known else float("nan"),
            ),
            _row("transitions", "blips", t.n_blips),
            _row("transitions", "blips with both legs confident", t.n_confident_blips),
            *(_row("transitions", f"confident per billion tokens, stage {r.stage}", r.per_billion) for r in t.stages),
            _row("transitions", "heads whose mask changed at least once", t.ever_changed),
            _row("transitions", "heads whose mask changed more than once", t.more_than_once),
            _row("transitions", "heads with a confident transition", t.confidently_changed),
        ]
        if d.last is not None:
            rows.append(_row("input dependence", "pooled Jaccard at the last shared checkpoint", d.last))
        if d.noise_floor is not None:
            rows.append(_row("input dependence", "across-set minus within-set agreement", d.noise_floor.difference))
        out = pd.DataFrame(rows)
        out.insert(0, "score_fn", f.score_fn)
        return out

    def findings_object(self, score_fn: str | None = None):
        """The `findings.dynamics.Findings` of the series' primary set (default function ahon_ln when tracked)."""
        from dormant_tasks.findings import series_findings

        return series_findings(self.view.store, self.model_id, score_fn)

    def evaluations(self) -> pd.DataFrame:
        """The series' rows of the `evaluations` table (accuracy per function, fraction zeroed, task)."""
        return _frame(store.read_table(self.view.store, "evaluations", model_id=self.model_id))


def _listed(score_fns) -> list[str] | None:
    return [score_fns] if isinstance(score_fns, str) else score_fns


def _row(finding: str, quantity: str, value) -> dict:
    """One findings row: a plain number (a count: method "count"), or a value with its 95% interval, the interval's
    method and the units behind it (an `Estimate`, or a `Share` with k of n)."""
    low, high = (getattr(value, "low", float("nan")), getattr(value, "high", float("nan")))
    k, n = getattr(value, "k", None), getattr(value, "n", None)
    number = getattr(value, "value", value)
    method, units = getattr(value, "method", "count"), getattr(value, "n_units", None)
    return {
        "finding": finding,
        "quantity": quantity,
        "value": float(number),
        "low": low,
        "high": high,
        "method": method,
        "n_units": units,
        "k": k,
        "n": n,
    }
