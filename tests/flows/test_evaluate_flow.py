"""The evaluate flow and `dormant evaluate` on real tiny checkpoints, lm-eval's tasks on bundled data, a real store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dormant_tasks.evaluation import targets
from dormant_tasks.evaluation.intervals import ItemResampling
from dormant_tasks.evaluation.leaderboard import load_leaderboard
from dormant_tasks.evaluation.leaderboard_rows import AVERAGE_MODEL, BEST
from dormant_tasks.evaluation.metric import pct_zeroed_within_1pt
from dormant_tasks.evaluation.request import EvalRequest
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.request import TrackRequest
from flows.cli import build_parser
from flows.evaluate import evaluate
from flows.track import track
from tests.builders.cli import invoke

pytestmark = pytest.mark.usefixtures("prefect_harness")
REPO = Path(__file__).resolve().parents[2]


def counted(monkeypatch, module, name: str) -> list:
    """Record every call of the real `module.name` (it still runs): how often a run asked it."""
    real, calls = getattr(module, name), []

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


@pytest.mark.slow
def test_dynamic_sweep_writes_base_and_seven_thresholds_per_function(tiny_model_dir, tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    # `dormant evaluate` in-process: its run(), with this session's Prefect test server instead of its own
    monkeypatch.setattr("flows.session.start_prefect", lambda: None)
    resolved = counted(monkeypatch, targets, "single_target")
    argv = ["evaluate", "--model", str(tiny_model_dir), "--scores", "ahon_ln", "awft", "--limit", "12"]
    args = build_parser().parse_args([*argv, "--store", str(store), "--log-samples"])
    assert args.func(args) == 0
    assert len(resolved) == 1  # the CLI resolved the checkpoint before Prefect started; the flow took it as given
    out = capsys.readouterr().out
    # the bundled WinoGrande has no train split: the printed protocol says where its 5 shots come from
    protocol = "5-shot, acc,none, no chat template, BOS rule paper, data bundled, shots from validation"
    assert f"winogrande: 12 items, {protocol}" in out.splitlines(), out
    stored = read_table(store, "evaluations").to_pylist()
    assert len(stored) == 2 * 7
    assert {r["n_items"] for r in stored} == {12} and len({r["base_accuracy"] for r in stored}) == 1
    # the authors' protocol by default: WinoGrande 5-shot, no chat template for this id, no BOS added
    assert {(r["shots"], r["metric"], r["chat_template"], r["bos"], r["data_source"]) for r in stored} == {
        (5, "acc,none", False, "paper", "bundled")
    }
    items = read_table(store, "evaluation_items").to_pylist()
    assert len(items) == 12 * (1 + 2 * 7) and {i["request_id"] for i in items} == {stored[0]["request_id"]}
    base_items = [i for i in items if i["mode"] == "base"]
    assert sum(i["correct"] for i in base_items) / 12 == pytest.approx(stored[0]["base_accuracy"])
    for fn in ("ahon_ln", "awft"):
        mine = sorted((r for r in stored if r["score_fn"] == fn), key=lambda r: r["quantile"])
        assert [r["quantile"] for r in mine] == pytest.approx([0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3])
        assert mine[0]["frac_zeroed"] <= mine[-1]["frac_zeroed"] <= 1.0
        assert mine[0]["mode"] == "dynamic" and 0.0 <= mine[0]["accuracy"] <= 1.0
        points = [(100 * r["frac_zeroed"], 100 * r["accuracy"]) for r in mine]
        base = 100 * mine[0]["base_accuracy"]
        assert 0.0 <= pct_zeroed_within_1pt(points, base) <= max(p[0] for p in points)
    # the leaderboard reads the items lm-eval scored: an interval per value, and the best function chosen on
    # the even items and reported on the odd ones
    board = load_leaderboard(store, resampling=ItemResampling(200, 0), select_on="even")
    assert not [n for n in board.notes if "items" in n]  # every curve's items found and matching its accuracies
    assert board.interval == "paired bootstrap over items, 200 resamples, seed 0"
    for row in board.rows:
        if row.score_fn in ("ahon_ln", "awft") and row.model != AVERAGE_MODEL:
            assert row.n_items == 12 and row.low <= row.within_1pt <= row.high
    best = [r for r in board.rows if r.score_fn == BEST and r.model != AVERAGE_MODEL]
    assert [(r.chosen_on, r.reported_on, r.n_items) for r in best] == [("even items", "odd items", 6)]


@pytest.mark.slow
def test_series_mode_zeroes_each_tracked_mask(random_series, tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    track(
        TrackRequest(source=str(random_series), store=str(store), limit=4, score_fns=("ahon_ln", "awft"), report=False)
    )
    monkeypatch.setattr("flows.session.start_prefect", lambda: None)
    resolved = counted(monkeypatch, targets, "series_targets")
    argv = ["evaluate", "--model", str(random_series), "--series", "--scores", "ahon_ln", "--limit", "6"]
    args = build_parser().parse_args([*argv, "--store", str(store)])
    assert args.func(args) == 0
    assert len(resolved) == 1  # the series' checkpoints were read from the store once, by the CLI
    boards = [line for line in capsys.readouterr().out.splitlines() if re.fullmatch(r"\S+@\S+:", line)]
    rows = read_table(store, "evaluations").to_pylist()
    assert len(rows) == len(boards) == 3
    assert [b.rsplit("@", 1)[1].rstrip(":") for b in boards] == sorted(  # one leaderboard per checkpoint, in order
        (p.name for p in random_series.iterdir()), key=lambda n: int(n.split("step")[1].split("-")[0])
    )
    heads = read_table(store, "head_scores", filters={"score_fn": "ahon_ln"})
    for row in rows:
        assert row["mode"] == "static"
        dormant = [r for r in heads.to_pylist() if r["revision"] == row["revision"] and r["dormant"]]
        # a static mask zeroes its heads on every input: % zeroed = dormant heads / all heads
        assert row["frac_zeroed"] == pytest.approx(len(dormant) / 8)


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--tasks", "winogrnde"], 'did you mean "winogrande"'),
        (["--scores", "ahon_lm"], 'did you mean "ahon_ln"'),
        (["--limit", "0"], "--limit must be a positive integer"),
        (["--series", "--mode", "dynamic"], "--mode dynamic contradicts it"),
        (["--quantiles", "5"], "fractions in [0, 1]"),
        # these four get as far as lm-eval's tasks or the model before they refuse: ~20-45 s each
        pytest.param(["--tasks", "arc_challenge", "--datasets", "bundled"], "is not bundled", marks=pytest.mark.slow),
        pytest.param(["--tasks", "winogrande,wikitext"], "perplexity task", marks=pytest.mark.slow),
        pytest.param(["--chat-template", "on", "--limit", "2"], "no chat template", marks=pytest.mark.slow),
        pytest.param(["--mode", "static", "--tasks", "gsm8k"], "no tracked series", marks=pytest.mark.slow),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tiny_model_dir, tmp_path, extra, needle, prefect_api_url):
    """In-process (tests/builders/cli.py); a refusal that comes inside the flow runs it on the session's server."""
    store = tmp_path / "store"
    r = invoke(
        ["evaluate", "--model", tiny_model_dir, "--store", store, *extra],
        cwd=REPO,
        env={"PREFECT_API_URL": prefect_api_url},
    )
    lines = r.lines
    assert r.code == 2 and len(lines) == 1 and needle in lines[0], r.stderr[-1500:]
    assert lines[0].startswith("dormant evaluate: error: ")
    assert not store.exists()


def test_model_without_tokenizer_is_a_clear_error(tiny_model_dir, tmp_path, monkeypatch):
    import shutil

    bare = tmp_path / "bare"
    bare.mkdir()
    for f in tiny_model_dir.iterdir():
        if f.name in ("config.json", "model.safetensors", "generation_config.json"):
            shutil.copy(f, bare / f.name)
    from dormant_tasks.errors import CheckpointError

    resolved = counted(monkeypatch, targets, "single_target")
    with pytest.raises(CheckpointError, match="no tokenizer"):  # the flow from Python: it resolves the target
        evaluate(EvalRequest(model=str(bare), score_fns=("ahon_ln",), limit=2, store=str(tmp_path / "store")))
    assert len(resolved) == 1
    assert not list((tmp_path / "store").rglob("*.parquet"))
