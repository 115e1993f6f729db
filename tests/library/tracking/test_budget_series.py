"""`track --budget` on a real dense series (tiny OLMo-2 checkpoints on the straight lines between random anchors),
through the flow's library steps without Prefect (`tests/builders/track.py`): the budgeted run against the
exhaustive one, its choices against a replay of the search on the exhaustive store's rates, kill and rerun."""

from __future__ import annotations

import dataclasses

import pytest

from dormant_tasks.tracking import SeriesView, TrackRequest, budgeted_search, series_state
from dormant_tasks.tracking.budget import available_positions
from dormant_tasks.tracking.tracker import stored_rates
from tests.builders.series import save_interpolated_series
from tests.builders.track import track_steps

pytestmark = pytest.mark.slow  # two dozen real checkpoints scored, some twice: about a minute on 2 CPU cores

BUDGET = 9  # of 17


class Killed(Exception):
    pass


@pytest.fixture(scope="module")
def dense(tmp_path_factory, tiny_tokenizer):
    """(the series folder, its names, the exhaustive run's request), the exhaustive run done."""
    root = tmp_path_factory.mktemp("dense")
    folder, names = save_interpolated_series(root / "dense-olmo2", tiny_tokenizer, [0, 1, 2], 8)
    full = request_of(folder, root / "exhaustive")
    track_steps(full)
    return folder, names, full


def request_of(folder, store, budget=None) -> TrackRequest:
    return TrackRequest(
        source=str(folder),
        store=str(store),
        limit=32,
        score_fns=("ahon", "ahon_ln"),
        device="cpu",
        report=False,
        budget=budget,
    )


def stored_names(request) -> list[str]:
    return SeriesView.open(request.store, request.model_id).revisions


@pytest.fixture(scope="module")
def budgeted(dense, tmp_path_factory):
    folder, _, _ = dense
    request = request_of(folder, tmp_path_factory.mktemp("budget") / "store", BUDGET)
    track_steps(request)
    return request


def test_the_budgeted_run_makes_the_choices_of_the_search_replayed_on_the_exhaustive_rates(dense, budgeted):
    """The oracle: the taus are the series' (the last checkpoint's quantiles, scored first by both runs), so a
    checkpoint's rates are the same in both stores; the search replayed on the exhaustive store's rates must
    choose exactly the checkpoints the real budgeted run stored, and stay within the budget."""
    _, names, full = dense
    revisions = series_state(full).plan.selected
    positions, one_step = available_positions(list(revisions))
    rates = stored_rates(full, revisions)
    replay = budgeted_search(positions, BUDGET, lambda idx: {i: rates[names[i]] for i in idx}, one_step=one_step)
    assert [names[i] for i in sorted(replay)] == stored_names(budgeted)
    assert len(stored_names(budgeted)) <= BUDGET
    assert series_state(budgeted).done  # a rerun has nothing to score: answered from the store


def test_every_confident_transition_of_the_budgeted_run_agrees_with_the_exhaustive_run(dense, budgeted):
    """Same head, function and direction, and the exhaustive run's confident location inside the pair the budgeted
    run reports: the confident checkpoints its transition goes between (`from_confident_revision` ..
    `to_confident_revision`: a head active at two scored checkpoints may have been dormant in between, unseen, so
    the row's own pair can hold a mask change the exhaustive run found not confident)."""
    _, names, full = dense
    order = {n: i for i, n in enumerate(names)}
    exhaustive = [t for t in SeriesView.open(full.store, full.model_id).transitions().to_pylist() if t["confident"]]
    reported = [
        t for t in SeriesView.open(budgeted.store, budgeted.model_id).transitions().to_pylist() if t["confident"]
    ]
    assert exhaustive, "the dense series has confident transitions to find"
    for t in reported:
        lo, hi = order[t["from_confident_revision"]], order[t["to_confident_revision"]]
        assert lo <= order[t["from_revision"]] < order[t["to_revision"]] <= hi
        same = [
            e
            for e in exhaustive
            if (e["score_fn"], e["layer"], e["head_index"], e["from_state"], e["to_state"])
            == (t["score_fn"], t["layer"], t["head_index"], t["from_state"], t["to_state"])
            and lo <= order[e["from_revision"]] < order[e["to_revision"]] <= hi
        ]
        assert same, t


def test_killed_and_rerun_ends_with_the_checkpoints_of_an_uninterrupted_run(dense, budgeted, tmp_path):
    folder, _, _ = dense
    request = request_of(folder, tmp_path / "store", BUDGET)
    from dormant_tasks.run import Executor

    class DiesAfterFour(Executor):
        """A run killed as its fifth checkpoint starts computing (after the reference and three more)."""

        count = 1

        def compute(self, request, revision, series):
            if self.count >= 4:
                raise Killed
            self.count += 1
            return super().compute(request, revision, series)

    with pytest.raises(Killed):
        track_steps(request, DiesAfterFour())
    assert len(stored_names(request)) == 4
    track_steps(request)  # the same run again
    assert stored_names(request) == stored_names(budgeted)


def test_a_larger_budget_later_continues_from_what_is_stored(dense, budgeted, tmp_path):
    """What is stored counts: a second run with a larger budget scores only the difference."""
    folder, names, _ = dense
    request = dataclasses.replace(budgeted, budget=BUDGET + 3)
    before = stored_names(budgeted)
    result = track_steps(request)
    after = stored_names(request)
    assert set(before) <= set(after) and len(after) <= BUDGET + 3
    assert result.analysed == len(after) - len(before)
