"""`track --budget` through the track flow under a real Prefect server: the local runner's rounds, the choices
of the library's steps (tests/builders/track.py) on the same series, a finished budget answered from the store."""

from __future__ import annotations

import pytest

from dormant_tasks.tracking import SeriesView, series_state
from dormant_tasks.tracking.request import TrackRequest
from flows.runners import task_runner
from flows.track import track
from tests.builders.series import save_interpolated_series
from tests.builders.track import track_steps

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def short_dense(tmp_path_factory, tiny_tokenizer):
    root = tmp_path_factory.mktemp("short-dense")
    return save_interpolated_series(root / "dense-olmo2", tiny_tokenizer, [0, 1], 8)[0]


def _request(series, store, **kw) -> TrackRequest:
    return TrackRequest(
        source=str(series), store=str(store), limit=8, score_fns=("ahon",), report=False, budget=4, **kw
    )


def test_the_flow_scores_the_budget_as_the_library_steps_do(short_dense, tmp_path):
    request = _request(short_dense, tmp_path / "flow")
    result = track.with_options(task_runner=task_runner(request))(request)
    flow_names = SeriesView.open(request.store, request.model_id).revisions
    assert 2 <= len(flow_names) <= 4 and result.analysed == len(flow_names)
    steps = _request(short_dense, tmp_path / "steps")
    track_steps(steps)
    assert SeriesView.open(steps.store, steps.model_id).revisions == flow_names
    assert series_state(request).done  # the budget is spent or every change located: nothing left to score


@pytest.mark.slow
def test_on_dask_the_rounds_run_on_the_workers_and_stay_within_the_budget(short_dense, tmp_path):
    request = _request(short_dense, tmp_path / "dask", runner="dask", workers=2)
    result = track.with_options(task_runner=task_runner(request))(request)
    names = SeriesView.open(request.store, request.model_id).revisions
    assert 2 <= len(names) <= 4 and result.analysed == len(names) and not result.failed
