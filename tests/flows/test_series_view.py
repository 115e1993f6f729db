"""One request per run, one view of a series, one ordering: the issue-9 scenarios on real series and stores."""

from __future__ import annotations

import logging

import pytest

from dormant_tasks.errors import StoreError
from dormant_tasks.evaluation.targets import series_targets
from dormant_tasks.store.io import read_table
from dormant_tasks.store.provenance import read_request_json
from dormant_tasks.tiny import branch_name, checkpoint_steps
from dormant_tasks.tracking.request import TrackRequest
from dormant_tasks.tracking.series import SeriesView
from dormant_tasks.tracking.tracker import plan_series
from flows.cli import build_parser
from flows.cli.status import series_line
from flows.cli.track import request_from_args
from flows.track import track
from tests.builders.series import save_random_series

pytestmark = pytest.mark.usefixtures("prefect_harness")
TOKENS_PER_STEP = 8 * 64  # the demo's batch x sequence length


@pytest.fixture(scope="module")
def demo_like_series(tmp_path_factory, tiny_tokenizer):
    """Random tiny checkpoints under the demo series' own 12 branch names (steps 0 ... 2000)."""
    folder = tmp_path_factory.mktemp("demo-like") / "demo-like"
    names = [branch_name(s, s * TOKENS_PER_STEP) for s in checkpoint_steps(2000)]
    return save_random_series(folder, tiny_tokenizer, names, n_layers=1, n_heads=2, hidden_size=16)


def _selected(kind: str, series, *argv) -> list[int]:
    if kind == "checkpoints":
        from dormant_tasks.checkpoints.sources import list_revisions
        from flows.cli.checkpoints import selection_from_args

        args = build_parser().parse_args(["checkpoints", "--model", str(series), *argv])
        return [r.step for r in selection_from_args(args).apply(list_revisions(series).revisions)]
    args = build_parser().parse_args(["track", "--model", str(series), *argv])
    return [r.step for r in plan_series(request_from_args(args)).selected]


@pytest.mark.parametrize(
    "steps,expected",
    [("0:0", [0]), ("0:100", [0, 10, 25, 50, 100]), (":250", [0, 10, 25, 50, 100, 250]), ("1500:", [1500, 2000])],
)
def test_checkpoints_and_track_select_the_same_steps(demo_like_series, steps, expected):
    assert _selected("checkpoints", demo_like_series, "--steps", steps) == expected
    assert _selected("track", demo_like_series, "--steps", steps) == expected


def _steps(steps: str):
    """The Selection that `dormant track --steps STEPS` builds."""
    return request_from_args(build_parser().parse_args(["track", "--model", "x", "--steps", steps])).selection


def test_track_steps_0_0_stores_step_0_alone(demo_like_series, tmp_path):
    request = TrackRequest(
        source=str(demo_like_series),
        store=str(tmp_path / "s"),
        limit=2,
        selection=_steps("0:0"),
        score_fns=("ahon_ln",),
        report=False,
    )
    assert track(request).analysed == 1
    assert read_table(tmp_path / "s", "checkpoints").column("step").to_pylist() == [0]


def test_max_spreads_over_early_middle_and_late(demo_like_series):
    steps = _selected("track", demo_like_series, "--max", "6")
    assert steps[0] == 0 and steps[-1] == 2000 and len(steps) == 6
    assert any(250 <= s <= 1500 for s in steps), steps


def test_quantile_taus_come_from_the_last_checkpoint_of_the_whole_series(random_series, tmp_path):
    store, kw = tmp_path / "s", dict(source=str(random_series), limit=4, score_fns=("ahon",), report=False)
    out = track(TrackRequest(store=str(store), selection=_steps(":10"), **kw))
    (tau,) = read_table(store, "taus").to_pylist()
    assert tau["reference_revision"] == "stage1-step25-tokens51K"  # not step 10, the last selected
    assert out.analysed == 2  # the reference was scored for tau, but is not stored: it was not selected
    assert sorted(read_table(store, "checkpoints").column("step").to_pylist()) == [0, 10]
    with pytest.raises(StoreError, match="fixed its quantile taus from stage1-step25"):
        track(TrackRequest(store=str(store), reference="stage1-step10-tokens20K", **kw))
    other = tmp_path / "s2"
    track(TrackRequest(store=str(other), reference="stage1-step10-tokens20K", **kw))
    assert read_table(other, "taus").column("reference_revision").to_pylist() == ["stage1-step10-tokens20K"]


def test_main_is_ordered_after_every_checkpoint(tmp_path, tiny_tokenizer):
    from dormant_tasks.reporting.series_data import load_series

    series = save_random_series(
        tmp_path / "with-main", tiny_tokenizer, ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "main"]
    )
    store = tmp_path / "s"
    track(
        TrackRequest(
            source=str(series),
            store=str(store),
            limit=4,
            score_fns=("ahon_ln", "awft", "aeqd_ln"),
            include_main=True,
            report=False,
        )
    )
    view = SeriesView.open(store, "with-main")
    assert view.revisions == ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "main"]
    pairs = {(r["from_revision"], r["to_revision"]) for r in view.transitions().to_pylist()}
    assert pairs <= {("stage1-step0-tokens0K", "stage1-step10-tokens20K"), ("stage1-step10-tokens20K", "main")}
    assert load_series(store, "with-main").revisions[-1] == "main"


def test_partial_retau_then_every_reader_agrees_and_a_full_retau_converges(random_series, tmp_path):
    store, kw = tmp_path / "s", dict(source=str(random_series), limit=4, score_fns=("ahon_ln", "awft"), report=False)
    first = track(TrackRequest(store=str(store), **kw))
    assert first.n_checkpoints == 3
    part = track(TrackRequest(store=str(store), selection=_steps(":10"), taus=("ahon_ln=0.9",), retau=True, **kw))
    assert (part.n_checkpoints, part.n_stale) == (2, 1)

    view = SeriesView.open(store, "random-olmo2")
    assert view.taus_id == part.taus_id and len(view.revisions) == 2
    current = view.transitions()
    assert current.num_rows == part.n_transitions
    assert set(current.column("taus_id").to_pylist()) <= {part.taus_id}
    all_rows = read_table(store, "transitions")
    assert all_rows.num_rows >= current.num_rows  # the first run's rows stay, under their own taus_id
    assert series_line(store, "random-olmo2").startswith("random-olmo2: 2 checkpoints, steps 0..10, ahon_ln dormant")
    line = series_line(store, "random-olmo2")
    assert (
        f"; {part.n_transitions} transitions over all " in line and "confident" in line and "(1 more checkpoint" in line
    )
    assert [t.revision.name for t in series_targets(store, str(random_series))] == view.revisions
    from dormant_tasks.reporting.series_data import load_series

    assert load_series(store, "random-olmo2").revisions == view.revisions

    full = track(TrackRequest(store=str(store), taus=("ahon_ln=0.9",), retau=True, **kw))
    assert (full.n_checkpoints, full.n_stale, full.taus_id) == (3, 0, part.taus_id)
    assert SeriesView.open(store, "random-olmo2").revisions == [
        r.name for r in plan_series(TrackRequest(store=str(store), **kw)).selected
    ]


def test_every_row_names_the_request_that_wrote_it(random_series, tmp_path):
    request = TrackRequest(
        source=str(random_series), store=str(tmp_path / "s"), limit=2, score_fns=("ahon_ln",), report=False
    )
    track(request)
    ckpts = read_table(tmp_path / "s", "checkpoints")
    assert set(ckpts.column("request_id").to_pylist()) == {request.request_id}
    saved = read_request_json(tmp_path / "s", "random-olmo2", request.request_id)
    assert TrackRequest.from_json(saved) == request


def test_the_run_summary_counts_truncated_inputs(random_series, tmp_path, caplog):
    """The count reaches the run's summary (the CLI prints it once); per checkpoint it is an INFO line, not a
    WARNING repeated for every checkpoint of the series."""
    caplog.set_level(logging.INFO, logger="dormant_tasks.engine.scoring")
    texts = tmp_path / "texts.txt"
    texts.write_text("a short text\n" + "a very long text " * 200 + "\n", encoding="utf-8")
    out = track(
        TrackRequest(
            source=str(random_series),
            store=str(tmp_path / "s"),
            texts=str(texts),
            max_tokens=16,
            score_fns=("ahon_ln",),
            report=False,
        )
    )
    assert out.n_truncated == 1
    assert list(out.truncated.values()) == [1] and list(out.truncated)[0].startswith("texts-")  # named by its set
    assert set(read_table(tmp_path / "s", "checkpoints").column("n_inputs").to_pylist()) == {2}
    cut = [r for r in caplog.records if r.name == "dormant_tasks.engine.scoring" and "were cut" in r.getMessage()]
    assert len(cut) == out.analysed and {r.levelno for r in cut} == {logging.INFO}
