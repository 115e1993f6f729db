"""The authors' Table 2 aggregate and the seed comparison, on the 14 published (Ours, AWFT) pairs as curves.

Each published value v becomes a curve whose "% zeroed within 1 point" is v: (0, 80), (v, 79), (v + 10, 70)
against base 80. Fed the seed's 14 models, `dormant leaderboard` must print their averages: Ours 14.45 and
AWFT 6.90 (and 14.53 for the best of all functions, AWFT included: the number the issue found).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from dormant_tasks.engine.score_functions import ALL_IDS, SCORE_FUNCTIONS
from dormant_tasks.evaluation.authors import (
    AGGREGATE_ORDER,
    AUTHORS_NAMES,
    ThresholdError,
    authors_taus,
    authors_thresholds,
    seed_values,
)
from dormant_tasks.evaluation.leaderboard import load_leaderboard
from dormant_tasks.evaluation.leaderboard_rows import AVERAGE_MODEL, BEST, OURS, OURS_VS_AWFT
from dormant_tasks.evaluation.reproduction import format_seed_comparison, seed_comparison
from dormant_tasks.evaluation.request import DEFAULT_QUANTILES
from dormant_tasks.store.io import write_table

T0 = datetime(2025, 5, 1, tzinfo=UTC)
TASK = "winogrande"


def curve_rows(model: str, fn: str, within: float, i: int) -> list[dict]:
    points = [(0.0, 0.80), (within / 100, 0.79), (within / 100 + 0.10, 0.70)]
    return [
        {
            **{"model_id": model, "revision": "main", "stage": -1, "step": -1, "tokens": -1, "task": TASK},
            **{"shots": 5, "mode": "dynamic", "score_fn": fn, "quantile": q, "tau": 0.5, "frac_zeroed": x},
            **{"accuracy": acc, "n_items": 1267, "base_accuracy": 0.80, "code_version": "test"},
            **{"request_id": f"r{i}", "metric": "acc,none", "chat_template": "Instruct" in model, "bos": "paper"},
            **{"fewshot_split": "validation", "data_source": "bundled", "lm_eval_version": "0.4.13"},
            **{"chance": 0.5, "evaluated_at": T0, "rendering": "paper"},
        }
        for q, (x, acc) in zip((0.0, 0.05, 0.10), points)
    ]


@pytest.fixture(scope="module")
def seed_store(tmp_path_factory):
    """Per seed model: its 'Ours' function's curve, AWFT's, and a random baseline below both."""
    root = tmp_path_factory.mktemp("seed") / "store"
    values = seed_values()
    models = sorted({m for m, _ in values if m != AVERAGE_MODEL})
    assert len(models) == 14
    for i, model in enumerate(models):
        fns = [fn for m, fn in values if m == model and fn not in ("awft", "ours")]
        fn = fns[0] if fns else "ahon_ln"  # the two rows whose label names another function: any non-AWFT one
        rows = curve_rows(model, fn, values[(model, "ours")], i)
        rows += curve_rows(model, "awft", values[(model, "awft")], i)
        rows += curve_rows(model, "random", 1.0, i)
        write_table(root, "evaluations", rows, file_key=f"r{i}")
    return root


def cell(board, fn, model):
    (row,) = [r for r in board.rows if (r.score_fn, r.model, r.task) == (fn, model, TASK)]
    return row


def test_their_aggregate_on_the_published_pairs(seed_store):
    board = load_leaderboard(seed_store)
    ours = cell(board, OURS, AVERAGE_MODEL)
    awft = cell(board, "awft", AVERAGE_MODEL)
    assert ours.n_models == awft.n_models == 14
    assert f"{ours.within_1pt:.2f}" == "14.45"
    assert f"{awft.within_1pt:.2f}" == "6.90"
    assert cell(board, OURS_VS_AWFT, AVERAGE_MODEL).within_1pt == pytest.approx(ours.within_1pt - awft.within_1pt)
    # the best of all functions takes AWFT where it wins (Llama-3.1-8B-Instruct, Qwen2.5-14B): another number
    assert f"{cell(board, BEST, AVERAGE_MODEL).within_1pt:.2f}" == "14.53"
    (note,) = board.notes  # which rendering the chat-templated numbers used
    assert note.startswith("winogrande: chat-templated prompts rendered as lm-eval 0.4.5 (paper): ")
    assert "allenai/OLMo-2-1124-7B-Instruct" in note and "allenai/OLMo-2-1124-7B," not in note
    llama = cell(board, OURS, "meta-llama/Llama-3.1-8B-Instruct")
    assert llama.best_fn == "ahon_ln" and llama.within_1pt == pytest.approx(11.89)
    assert cell(board, OURS_VS_AWFT, "meta-llama/Llama-3.1-8B-Instruct").within_1pt == pytest.approx(11.89 - 12.44)


def test_ours_includes_random_and_keeps_their_order_among_ties(tmp_path):
    rows = curve_rows("org/m", "ahon_ln", 5.0, 0) + curve_rows("org/m", "random", 7.0, 0)
    rows += curve_rows("org/m", "awft", 9.0, 0) + curve_rows("org/m", "lthon_ln", 7.0, 0)
    write_table(tmp_path, "evaluations", rows, file_key="r")
    board = load_leaderboard(tmp_path)
    ours = cell(board, OURS, "org/m")
    # random and lthon_ln tie at 7: random comes first in their function order; AWFT (9) is no candidate
    assert ours.within_1pt == pytest.approx(7.0) and ours.best_fn == "random"
    assert AGGREGATE_ORDER.index("random") < AGGREGATE_ORDER.index("lthon_ln")
    assert cell(board, BEST, "org/m").best_fn == "awft"


def test_ours_takes_their_notebooks_list_without_fhon_and_ties_in_its_order(tmp_path):
    """fhon is the best function here, yet their list has no fhon: "Ours" is the best of the others, and fhon
    stays on the board as its own cell and as the best of all functions. ahon_ln (their HONOR) ties with
    lthon_ln: their notebook lists UnnormalizedHONOR and HONOR last, so LTHON (LN) takes "Ours"."""
    rows = curve_rows("org/m", "fhon", 12.0, 0) + curve_rows("org/m", "fhon_ln", 11.0, 0)
    rows += curve_rows("org/m", "ahon_ln", 8.0, 0) + curve_rows("org/m", "lthon_ln", 8.0, 0)
    rows += curve_rows("org/m", "ahon", 8.0, 0) + curve_rows("org/m", "awft", 3.0, 0)
    write_table(tmp_path, "evaluations", rows, file_key="r")
    board = load_leaderboard(tmp_path)
    ours = cell(board, OURS, "org/m")
    assert ours.within_1pt == pytest.approx(8.0) and ours.best_fn == "lthon_ln"
    assert cell(board, OURS_VS_AWFT, "org/m").within_1pt == pytest.approx(5.0)
    assert cell(board, "fhon", "org/m").within_1pt == pytest.approx(12.0)
    assert cell(board, BEST, "org/m").best_fn == "fhon"
    assert "fhon" not in AGGREGATE_ORDER and "fhon_ln" not in AGGREGATE_ORDER
    assert AGGREGATE_ORDER[-2:] == ("ahon", "ahon_ln")  # UnnormalizedHONOR, HONOR


def test_their_aggregate_list_is_their_functions_but_full_head_output():
    names = {fn for task in authors_thresholds().values() for model in task.values() for fn in model}
    without_fhon = {AUTHORS_NAMES[n] for n in names} - {"fhon", "fhon_ln"}
    assert set(AGGREGATE_ORDER) == without_fhon | {"random"} and len(AGGREGATE_ORDER) == 14


def test_seed_comparison_prints_every_published_cell(seed_store):
    board = load_leaderboard(seed_store)
    rows = seed_comparison(board.rows)
    published = seed_values()
    assert {(r["model"], r["score_fn"]) for r in rows} == set(published)
    for r in rows:
        assert r["ours"] is not None, r
        assert r["difference"] == pytest.approx(r["ours"] - r["published"], abs=1e-9)
        assert abs(r["difference"]) < 0.006  # the curves were built from the published values
    text = format_seed_comparison(rows)
    assert "| Average (14 models) | ours | 14.45 | 14.45 | +0.00 |" in text
    assert "| Average (14 models) | awft | 6.90 | 6.90 | +0.00 |" in text
    assert "lm-eval 0.4.5 (paper)" in text and "plain text" in text


def test_every_authors_name_maps_to_one_of_our_functions():
    names = {fn for task in authors_thresholds().values() for model in task.values() for fn in model}
    assert names <= set(AUTHORS_NAMES), names - set(AUTHORS_NAMES)
    assert set(AUTHORS_NAMES.values()) <= set(SCORE_FUNCTIONS)
    assert len(set(AUTHORS_NAMES.values())) == len(AUTHORS_NAMES)  # one of ours per name of theirs
    assert set(AUTHORS_NAMES.values()) == set(ALL_IDS)  # and every one of ours has theirs (the head roles are Xu's)


def test_authors_taus_read_their_file():
    taus = authors_taus(
        "allenai/OLMo-2-1124-7B", ["winogrande"], ["ahon_ln", "awft", "random"], DEFAULT_QUANTILES, "authors"
    )
    raw = authors_thresholds()["winogrande"]["allenai_OLMo-2-1124-7B"]
    assert taus["winogrande"]["ahon_ln"] == raw["HONOR"] and taus["winogrande"]["awft"] == raw["Dormant"]
    assert taus["winogrande"]["random"] == list(DEFAULT_QUANTILES)
    assert all(len(v) == 7 for v in taus["winogrande"].values())
    # awft is a ">" function: its thresholds fall as the quantile (share of heads) grows
    assert raw["Dormant"] == sorted(raw["Dormant"], reverse=True)


@pytest.mark.parametrize(
    ("model", "task", "fn", "says"),
    [
        ("org/tiny", "winogrande", "ahon_ln", "cover 14 models, not 'org/tiny'"),
        ("allenai/OLMo-2-1124-7B", "hellaswag", "ahon_ln", "not 'hellaswag'"),
        ("allenai/OLMo-2-1124-7B", "winogrande", "fhon", "no thresholds of fhon"),
    ],
)
def test_authors_thresholds_where_they_have_none(model, task, fn, says):
    with pytest.raises(ThresholdError, match="--thresholds") as e:
        authors_taus(model, [task], [fn], DEFAULT_QUANTILES, "authors")
    assert says in str(e.value) and "\n" not in str(e.value)
    assert authors_taus(model, [task], [fn], DEFAULT_QUANTILES, "auto") == {}  # auto: ours place them


def test_bundled_files_are_the_published_ones():
    from dormant_tasks.paths import bundled_file

    assert json.loads(bundled_file("seed_leaderboard.json").read_text())["task"] == "winogrande"
    assert "MIT License" in bundled_file("authors_thresholds.LICENSE").read_text()
    assert not math.isnan(seed_values()[(AVERAGE_MODEL, "ours")])


def test_a_model_outside_the_seed_gets_its_row_and_no_average(tmp_path, capsys):
    """The demo's case: one tiny model, not among the 14. Its numbers are shown, never averaged against the
    published 14-model average."""
    from flows.cli import main

    rows = curve_rows("tiny-olmo2", "awft", 28.03, 0) + curve_rows("tiny-olmo2", "ahon_ln", 20.0, 0)
    write_table(tmp_path, "evaluations", rows, file_key="r")
    compared = seed_comparison(load_leaderboard(tmp_path).rows)
    assert not [r for r in compared if r["model"] == AVERAGE_MODEL]
    (awft,) = [r for r in compared if (r["model"], r["score_fn"]) == ("tiny-olmo2", "awft")]
    assert awft["published"] is None and awft["difference"] is None and awft["ours"] == pytest.approx(28.03, abs=0.01)
    assert main(["leaderboard", "--store", str(tmp_path), "--reproduction"]) == 0
    out = capsys.readouterr().out
    assert "Average" not in out
    assert "| tiny-olmo2 | awft | n/a | 28.03 | n/a |" in out


def test_an_average_compares_only_the_models_both_sides_have(tmp_path):
    values = seed_values()
    shared = ["allenai/OLMo-2-1124-7B", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"]
    for i, model in enumerate(shared):
        write_table(
            tmp_path, "evaluations", curve_rows(model, "awft", values[(model, "awft")] + 1.0, i), file_key=f"r{i}"
        )
    (avg,) = [r for r in seed_comparison(load_leaderboard(tmp_path).rows) if r["model"] == AVERAGE_MODEL]
    published = sum(values[(m, "awft")] for m in shared) / 3  # theirs over the same 3 models, not their 14
    assert (avg["score_fn"], avg["n_models"], avg["n_published"]) == ("awft", 3, 14)
    assert avg["published"] == pytest.approx(published)
    assert avg["difference"] == pytest.approx(1.0, abs=0.01)
    assert f"| Average (3 of 14 models) | awft | {published:.2f} |" in format_seed_comparison([avg])
