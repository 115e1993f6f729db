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
class Store(store.StoreFolder):
    """A dormant-heads store (the folder `dormant track --store` wrote), opened read-only: checked once, when opened
    (`store.StoreFolder`), and passed as it is to every read."""

    @property
    def path(self) -> Path:
        return self.root

    def series(self) -> list[str]:
        """The model ids of the series the store holds, tracked or only evaluated."""
        return store.list_models(self)

    def __getitem__(self, model_id: str) -> SeriesResults:
        return self.open_series(model_id)

    def open_series(self, model_id: str, calibration_id: str | None = None) -> SeriesResults:
        """One tracked series on one calibration set (default: its primary set). StoreError, naming what the
        store holds, when it was never tracked."""
        return SeriesResults(SeriesView.open(self, model_id, calibration_id))

    def calibration_ids(self, model_id: str) -> list[str]:
        """The series' calibration sets, the primary one first."""
        return SeriesView.calibration_ids(self, model_id)

    def evaluations(self, model_id: str | None = None) -> pd.DataFrame:
        """The `evaluations` table (docs/DATA_CONTRACT.md), of one series or all; evaluated series need not be
        tracked."""
        return _frame(store.read_table(self, store.Table.evaluations, model_id=model_id))


def open_store(path) -> Store:
    """Open the store at `path` (a StoreError, with the fix, when it is not one): a folder, or a series published on
    the Hub, `hf://datasets/ORG/NAME` (fetched once into a cached, read-only copy: docs/PUBLISHING.md)."""
    from dormant_tasks.publishing import open_published

    return Store.open(open_published(path))


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
        """The paper's three findings (docs/SCORES.md) as the findings table (`findings/table.py`, the published
        `findings`): one row per quantity, its id (`finding`, `quantity`), English `label` (null: none), `value`,
        its 95% interval `low`/`high`, `method`, `unit`, `n_units`, `k` of `n` for shares, and a `note` on what
        is missing. The full objects: `findings_object`."""
        from dormant_tasks.findings import findings_table

        return _frame(findings_table([self.findings_object(score_fn)]))

    def findings_object(self, score_fn: str | None = None):
        """The `findings.dynamics.Findings` of the series' primary set (default function ahon_ln when tracked)."""
        from dormant_tasks.findings import series_findings

        return series_findings(self.view.store, self.model_id, score_fn)

    def evaluations(self) -> pd.DataFrame:
        """The series' rows of the `evaluations` table (accuracy per function, fraction zeroed, task)."""
        return _frame(store.read_table(self.view.store, store.Table.evaluations, model_id=self.model_id))


def _listed(score_fns) -> list[str] | None:
    return [score_fns] if isinstance(score_fns, str) else score_fns
