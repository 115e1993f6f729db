"""`track`'s default set (docs/SCORES.md §4, "The default set"): a new series is tracked with `TRACKED_IDS`; a
series first tracked with other functions (every function, as the default was before) keeps them on a run that
names no --scores, so its taus and stored checkpoints stay current and nothing is scored again."""

from __future__ import annotations

from dormant_tasks import tracking as tracker
from dormant_tasks.engine import ALL_IDS, TRACKED_IDS
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.request import TrackRequest
from tests.builders.series import save_random_series
from tests.builders.track import track_steps

NAMES = ["stage1-step0-tokens0K", "stage1-step10-tokens20K"]


def test_a_new_series_gets_the_default_set_and_a_stored_one_keeps_its_own(tmp_path, tiny_tokenizer):
    series = save_random_series(tmp_path / "random-olmo2", tiny_tokenizer, NAMES)
    new, old = tmp_path / "new", tmp_path / "old"
    track_steps(TrackRequest(source=str(series), store=str(new), limit=4, report=False))
    assert sorted(set(read_table(new, "taus").column("score_fn").to_pylist())) == sorted(TRACKED_IDS)
    assert {"awft", "awft_ln", "random"}.isdisjoint(TRACKED_IDS)

    track_steps(TrackRequest(source=str(series), store=str(old), limit=4, score_fns=ALL_IDS, report=False))
    rerun = TrackRequest(source=str(series), store=str(old), limit=4, report=False)  # no --scores
    state = tracker.series_state(rerun)
    assert state.request.score_fns == ALL_IDS and state.done  # the series' own 16: nothing to score again
    assert sorted(set(read_table(old, "taus").column("score_fn").to_pylist())) == sorted(ALL_IDS)
