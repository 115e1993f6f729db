"""Scale-out: the same track flow on a real local Dask cluster (2 worker processes) writes the same store."""

from __future__ import annotations

import numpy as np
import pytest

from dormant_tasks.requests import TrackRequest
from dormant_tasks.store import read_table
from flows.runners import task_runner
from flows.track import track

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _sorted(table, keys):
    return table.sort_by([(k, "ascending") for k in keys])


def test_dask_cluster_store_equals_thread_runner_store(random_series, tmp_path):
    pytest.importorskip("prefect_dask")
    kw = dict(source=str(random_series), limit=6, score_fns=("ahon_ln", "lthon_ln", "awft", "ahon"), report=False)
    local_request = TrackRequest(store=str(tmp_path / "local"), **kw)
    dask_request = TrackRequest(store=str(tmp_path / "dask"), runner="dask", workers=2, **kw)
    local = track.with_options(task_runner=task_runner(local_request))(local_request)
    dask = track.with_options(task_runner=task_runner(dask_request))(dask_request)
    assert local["analysed"] == dask["analysed"] == 3
    keys = ["revision", "score_fn", "layer", "head_index"]
    a = _sorted(read_table(tmp_path / "local", "head_scores"), keys)
    b = _sorted(read_table(tmp_path / "dask", "head_scores"), keys)
    for col in ("revision", "score_fn", "layer", "head_index", "dormant", "taus_id", "calibration_id"):
        assert a.column(col).to_pylist() == b.column(col).to_pylist(), col
    for col in ("score", "score_std", "tau", "dormant_rate"):
        np.testing.assert_allclose(a.column(col).to_numpy(), b.column(col).to_numpy(), rtol=1e-12, equal_nan=True)
    ta = _sorted(read_table(tmp_path / "local", "transitions"), keys)
    tb = _sorted(read_table(tmp_path / "dask", "transitions"), keys)
    assert ta.select(keys + ["from_state", "to_state"]).equals(tb.select(keys + ["from_state", "to_state"]))
