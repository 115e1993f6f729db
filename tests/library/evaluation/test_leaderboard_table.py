"""`dormant leaderboard` and `dormant_tasks.evaluation.leaderboard`: the table across models from real store files.

The store holds 3 models x 3 functions x 2 tasks of hand-made sweeps at x = 0, 10, 20, 30 % of heads zeroed.
Each curve is given by its accuracy drops d (in points) below the base accuracy; the line "within 1 point" is
d = 1, and the metric is the x of the last crossing of it (docs/SCORES.md §6). Every expected value below is
worked out by hand in its comment: "dist" is 1 - d, the distance above the line at each x.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dormant_tasks.errors import ConfigError, StoreError
from dormant_tasks.evaluation import rank_agreement
from dormant_tasks.evaluation.intervals import ItemResampling
from dormant_tasks.evaluation.leaderboard import load_leaderboard
from dormant_tasks.evaluation.leaderboard_rows import AVERAGE_MODEL, BEST, OURS, OURS_VS_AWFT, LeaderboardRow
from dormant_tasks.evaluation.leaderboard_table import CSV_COLUMNS, LEADERBOARD_FORMATS, format_leaderboard_table
from dormant_tasks.evaluation.metric import AVERAGE_TASK
from dormant_tasks.evaluation.rank_agreement import auc_agreement, spearman
from dormant_tasks.store.io import store_folder, write_table

REPO = Path(__file__).resolve().parents[3]
DORMANT = REPO / ".venv" / "bin" / "dormant"
T0 = datetime(2025, 5, 1, tzinfo=UTC)
QUANTILES = (0.0, 0.1, 0.2, 0.3)
X = (0.0, 0.1, 0.2, 0.3)  # measured fraction zeroed at each quantile
ALPHA, BETA, GAMMA = "org/alpha", "org/beta", "gamma-local"
A, B = "winogrande", "piqa"
BASE = {A: 0.80, B: 0.60}

# drops (points) at x = 0, 10, 20, 30 %
DROPS = {
    (ALPHA, A): {"ahon_ln": (0, 0.5, 1.5, 4), "awft": (0, 2, 3, 5), "lthon_ln": (0, 0, 0.5, 1.5)},
    (BETA, A): {"ahon_ln": (0, 0.2, 0.6, 1.4), "awft": (0, 0.5, 0.5, 0.5), "lthon_ln": (0, 1.5, 0.5, 1.5)},
    (GAMMA, A): {"ahon_ln": (0, 0.4, 0.8, 1.2), "awft": (0, 0.25, 1.25, 2), "lthon_ln": (0, 5, 5, 5)},
    (ALPHA, B): {"ahon_ln": (0, 0.5, 0.9, 2.9), "awft": (0, 4, 4, 4), "lthon_ln": (0, 0.5, 1.3, 2)},
    (BETA, B): {"ahon_ln": (0, 0.1, 0.3, 0.9), "awft": (0, 2, 2, 2), "lthon_ln": (0, 0.2, 1.2, 2)},
    (GAMMA, B): {"ahon_ln": (0, 0.5, 1.5, 3), "awft": (0, 0.2, 0.4, 1.6), "lthon_ln": (0, 2, 3, 4)},
}

WITHIN = {
    # winogrande, base 80, line 79
    ("ahon_ln", ALPHA, A): 15.0,  # dist (1, .5, -.5, -3): 10 + .5 / 1 * 10
    ("awft", ALPHA, A): 5.0,  # dist (1, -1, ..): 0 + 1 / 2 * 10
    ("lthon_ln", ALPHA, A): 25.0,  # dist (1, 1, .5, -.5): 20 + .5 / 1 * 10
    ("ahon_ln", BETA, A): 25.0,  # dist (1, .8, .4, -.4): 20 + .4 / .8 * 10
    ("awft", BETA, A): 0.0,  # dist (1, .5, .5, .5): never crosses
    ("lthon_ln", BETA, A): 25.0,  # dist (1, -.5, .5, -.5): last crossing 20 + .5 / 1 * 10
    ("ahon_ln", GAMMA, A): 25.0,  # dist (1, .6, .2, -.2): 20 + .2 / .4 * 10
    ("awft", GAMMA, A): 17.5,  # dist (1, .75, -.25, -1): 10 + .75 / 1 * 10
    ("lthon_ln", GAMMA, A): 2.0,  # dist (1, -4, ..): 0 + 1 / 5 * 10
    # piqa, base 60, line 59
    ("ahon_ln", ALPHA, B): 20.5,  # dist (1, .5, .1, -1.9): 20 + .1 / 2 * 10
    ("awft", ALPHA, B): 2.5,  # dist (1, -3, ..): 0 + 1 / 4 * 10
    ("lthon_ln", ALPHA, B): 16.25,  # dist (1, .5, -.3, -1): 10 + .5 / .8 * 10
    ("ahon_ln", BETA, B): 0.0,  # dist (1, .9, .7, .1): never crosses
    ("awft", BETA, B): 5.0,  # dist (1, -1, ..): 0 + 1 / 2 * 10
    ("lthon_ln", BETA, B): 18.0,  # dist (1, .8, -.2, -1): 10 + .8 / 1 * 10
    ("ahon_ln", GAMMA, B): 15.0,  # dist (1, .5, -.5, -2): 10 + .5 / 1 * 10
    ("awft", GAMMA, B): 25.0,  # dist (1, .8, .6, -.6): 20 + .6 / 1.2 * 10
    ("lthon_ln", GAMMA, B): 5.0,  # dist (1, -1, ..): 0 + 1 / 2 * 10
    # the across-task average: base (80 + 60) / 2 = 70, drops (dA + dB) / 2, line 69
    ("ahon_ln", ALPHA, AVERAGE_TASK): 120 / 7,  # d (0, .5, 1.2, 3.45), dist (1, .5, -.2, ..): 10 + .5 / .7 * 10
    ("awft", ALPHA, AVERAGE_TASK): 10 / 3,  # d (0, 3, 3.5, 4.5): 0 + 1 / 3 * 10
    ("lthon_ln", ALPHA, AVERAGE_TASK): 20 + 20 / 17,  # d (0, .25, .9, 1.75), dist (.., .1, -.75): 20 + .1 / .85 * 10
    ("ahon_ln", BETA, AVERAGE_TASK): 20 + 55 / 7,  # d (0, .15, .45, 1.15), dist (.., .55, -.15): 20 + .55 / .7 * 10
    ("awft", BETA, AVERAGE_TASK): 8.0,  # d (0, 1.25, 1.25, 1.25): 0 + 1 / 1.25 * 10
    ("lthon_ln", BETA, AVERAGE_TASK): 20 + 5 / 3,  # d (0, .85, .85, 1.75), dist (.., .15, -.75): 20 + .15 / .9 * 10
    ("ahon_ln", GAMMA, AVERAGE_TASK): 10 + 55 / 7,  # d (0, .45, 1.15, 2.1), dist (1, .55, -.15): 10 + .55 / .7 * 10
    ("awft", GAMMA, AVERAGE_TASK): 20 + 70 / 39,  # d (0, .225, .825, 1.8), dist (.., .175, -.8): 20 + .175 / .975 * 10
    ("lthon_ln", GAMMA, AVERAGE_TASK): 20 / 7,  # d (0, 3.5, 4, 4.5): 0 + 1 / 3.5 * 10
}
# The best function per (model, task); beta's winogrande is a tie at 25 that the larger AUC breaks: ahon_ln's
# drops (0, .2, .6, 1.4) have the trapezoid area 1 + 4 + 10 = 15 point x % (AUC 80 - 15 / 30 = 79.5), lthon_ln's
# (0, 1.5, .5, 1.5) 7.5 + 10 + 10 = 27.5 (AUC 79.083).
BEST_FN = {
    (ALPHA, A): "lthon_ln",
    (BETA, A): "ahon_ln",
    (GAMMA, A): "ahon_ln",
    (ALPHA, B): "ahon_ln",
    (BETA, B): "lthon_ln",
    (GAMMA, B): "awft",
    (ALPHA, AVERAGE_TASK): "lthon_ln",
    (BETA, AVERAGE_TASK): "ahon_ln",
    (GAMMA, AVERAGE_TASK): "awft",
}


def sweep_rows(model, task, drops_by_fn, *, request_id, at, revision="main", shots=0, base=None, **protocol):
    """`evaluations` rows of one run of one task: every function at every quantile (accuracies as fractions)."""
    step = {"main": -1}.get(revision, int(revision.split("step")[1].split("-")[0]) if "step" in revision else -1)
    base = BASE[task] if base is None else base
    rows = []
    for fn, drops in drops_by_fn.items():
        for q, x, d in zip(QUANTILES, X, drops):
            rows.append(
                {
                    **{"model_id": model, "revision": revision, "stage": 1 if step >= 0 else -1, "step": step},
                    **{"tokens": step * 1000 if step >= 0 else -1, "task": task, "shots": shots, "mode": "dynamic"},
                    **{"score_fn": fn, "quantile": q, "tau": 0.5, "frac_zeroed": x, "accuracy": base - d / 100},
                    **{"n_items": 1000, "base_accuracy": base, "code_version": "test", "request_id": request_id},
                    **{"metric": "acc,none", "chat_template": False, "bos": "paper", "fewshot_split": None},
                    **{"data_source": "bundled", "lm_eval_version": "0.4.9", "chance": 0.5, "evaluated_at": at},
                    **protocol,
                }
            )
    return rows


def write_run(store, rows, key):
    write_table(store, "evaluations", rows, file_key=key)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("board") / "store"
    for i, ((model, task), drops) in enumerate(DROPS.items()):
        rid = f"req-{i}"
        write_run(root, sweep_rows(model, task, drops, request_id=rid, at=T0 + timedelta(minutes=i)), rid)
    static = sweep_rows(ALPHA, A, {"ahon_ln": (9, 9, 9, 9)}, request_id="static", at=T0 + timedelta(days=9))
    write_run(root, [{**r, "mode": "static", "quantile": None} for r in static[:1]], "static")  # ignored
    return root


def cell(board, fn, model, task) -> LeaderboardRow:
    (row,) = [r for r in board.rows if (r.score_fn, r.model, r.task) == (fn, model, task)]
    return row


def test_cells_are_the_hand_computed_values(store):
    board = load_leaderboard(store)
    assert board.revisions == {ALPHA: "main", BETA: "main", GAMMA: "main"} and board.notes == ()
    for (fn, model, task), expected in WITHIN.items():
        row = cell(board, fn, model, task)
        assert row.within_1pt == pytest.approx(expected, abs=1e-9), (fn, model, task)
        assert row.base_accuracy == pytest.approx({A: 80, B: 60, AVERAGE_TASK: 70}[task])
    # AUC = base - mean drop: alpha's winogrande ahon_ln drops (0, .5, 1.5, 4) have the area 2.5 + 10 + 27.5 = 40
    assert cell(board, "ahon_ln", ALPHA, A).auc == pytest.approx(80 - 40 / 30)
    assert cell(board, "ahon_ln", BETA, A).auc == pytest.approx(79.5)
    # 3 functions x 3 models x (2 tasks + average), the Average over models of each; per model and task the
    # authors' "ours", its lead over awft and the best of all functions, each with its Average
    assert len(board.rows) == 27 + 9 + (9 + 3) * 3
    assert cell(board, "ahon_ln", ALPHA, A).revision == "main" and cell(board, "ahon_ln", ALPHA, A).shots == 0


def test_average_rows_over_models(store):
    board = load_leaderboard(store)
    for fn in ("ahon_ln", "awft", "lthon_ln"):
        for task in (A, B, AVERAGE_TASK):
            row = cell(board, fn, AVERAGE_MODEL, task)
            expected = np.mean([WITHIN[(fn, m, task)] for m in (ALPHA, BETA, GAMMA)])
            assert row.within_1pt == pytest.approx(expected) and row.n_models == 3
    assert cell(board, "ahon_ln", AVERAGE_MODEL, A).within_1pt == pytest.approx(65 / 3)  # (15 + 25 + 25) / 3
    assert cell(board, "awft", AVERAGE_MODEL, A).within_1pt == pytest.approx(7.5)  # (5 + 0 + 17.5) / 3
    assert cell(board, "lthon_ln", AVERAGE_MODEL, B).within_1pt == pytest.approx(39.25 / 3)  # (16.25 + 18 + 5) / 3
    assert cell(board, "awft", AVERAGE_MODEL, A).base_accuracy == pytest.approx(80)


def test_best_function_per_model(store):
    board = load_leaderboard(store)
    for (model, task), fn in BEST_FN.items():
        row = cell(board, BEST, model, task)
        assert row.best_fn == fn, (model, task)
        assert row.within_1pt == pytest.approx(WITHIN[(fn, model, task)])
    assert cell(board, BEST, AVERAGE_MODEL, A).within_1pt == pytest.approx(25.0)  # (25 + 25 + 25) / 3
    assert cell(board, BEST, AVERAGE_MODEL, B).within_1pt == pytest.approx(63.5 / 3)  # (20.5 + 18 + 25) / 3


def test_sorted_by_function_then_model(store):
    rows = load_leaderboard(store).rows
    keys = [(r.score_fn, r.model, r.task) for r in rows]
    assert keys[:4] == [
        ("ahon_ln", GAMMA, B),
        ("ahon_ln", GAMMA, A),
        ("ahon_ln", GAMMA, AVERAGE_TASK),
        ("ahon_ln", ALPHA, B),
    ]
    fns = list(dict.fromkeys(r.score_fn for r in rows))
    assert fns == ["ahon_ln", "awft", "lthon_ln", OURS, OURS_VS_AWFT, BEST]
    models = list(dict.fromkeys(r.model for r in rows if r.score_fn == "awft"))
    assert models == [GAMMA, ALPHA, BETA, AVERAGE_MODEL]  # plain string order, Average last
    tasks = [r.task for r in rows if r.score_fn == "awft" and r.model == BETA]
    assert tasks == [B, A, AVERAGE_TASK]


def test_markdown(store):
    board = load_leaderboard(store)
    lines = format_leaderboard_table(board.rows, "markdown").splitlines()
    notes = lines[lines.index("") :]  # the footnotes of the marks, below the table
    lines = lines[: lines.index("")]
    # awft of BETA on A never crosses: its Average over models holds that authors' 0, marked and explained
    assert "‡: a mean or difference that counts a never-crossing curve as the authors' 0" in notes
    assert (
        lines[0]
        == "| score function | model | task | % zeroed within 1 point | AUC (mean accuracy %) | base accuracy |"
    )
    assert lines[1] == "|---|---|---|---:|---:|---:|"
    assert len(lines) == 2 + len(board.rows)
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert all(len(c) == 6 for c in cells)
    assert ["ahon_ln", ALPHA, A, "15.00", "78.67", "80.00"] in cells
    label = "best of all functions (lthon_ln)"
    assert [label, ALPHA, A, "25.00"] == cells[[c[:3] for c in cells].index([label, ALPHA, A])][:4]
    average = ["best of all functions", AVERAGE_MODEL, B]  # named so on its Average row too
    assert [*average, "21.17"] == [c for c in cells if c[:3] == average][0][:4]


def test_csv_parses_with_every_column(store):
    board = load_leaderboard(store)
    table = list(csv.DictReader(io.StringIO(format_leaderboard_table(board.rows, "csv"))))
    assert len(table) == len(board.rows) and list(table[0]) == list(CSV_COLUMNS)
    row = next(r for r in table if (r["score_fn"], r["model"], r["task"]) == ("awft", GAMMA, AVERAGE_TASK))
    assert float(row["within_1pt"]) == pytest.approx(20 + 70 / 39, abs=1e-12)  # full precision
    assert row["revision"] == "main" and row["n_models"] == "" and row["best_fn"] == ""
    best = next(r for r in table if (r["score_fn"], r["model"], r["task"]) == (BEST, AVERAGE_MODEL, A))
    assert best["n_models"] == "3" and best["best_fn"] == ""


def test_latex_is_a_tabular(store):
    text = format_leaderboard_table(load_leaderboard(store).rows, "latex")
    lines = text.splitlines()
    assert lines[0] == r"\begin{tabular}{lllrrr}" and lines[-1] == r"\end{tabular}"
    assert (
        r"score function & model & task & \% zeroed within 1 point & AUC (mean accuracy \%) & base accuracy \\" in lines
    )
    assert r"ahon\_ln & org/alpha & winogrande & 15.00 & 78.67 & 80.00 \\" in lines
    body = [line for line in lines if line.endswith(r"\\") and not line.startswith(r"\multicolumn")]
    assert all(line.count(" & ") == 5 for line in body)
    # the marks' footnotes span the table, inside it: "‡" (an average holding a never-crossing curve's 0)
    assert r"\multicolumn{6}{l}{\footnotesize ‡: a mean or difference that counts" in text


def test_unknown_format_is_refused():
    assert LEADERBOARD_FORMATS == ("markdown", "csv", "latex")
    with pytest.raises(ConfigError, match="did you mean"):
        format_leaderboard_table([], "markdwn")


def test_the_newest_run_wins_per_function(tmp_path):
    root = tmp_path / "store"
    old = {"ahon_ln": (0, 0.5, 1.5, 4), "awft": (0, 2, 3, 5)}
    write_run(root, sweep_rows(ALPHA, A, old, request_id="old", at=T0), "old")
    board = load_leaderboard(root)
    assert cell(board, "ahon_ln", ALPHA, A).within_1pt == pytest.approx(15.0)
    # a newer run of ahon_ln alone, with its own base accuracy: it replaces ahon_ln's cell, awft's stays
    newer = sweep_rows(
        ALPHA, A, {"ahon_ln": (0, 0.2, 0.6, 1.4)}, request_id="new", at=T0 + timedelta(hours=1), base=0.9
    )
    write_run(root, newer, "new")
    board = load_leaderboard(root)
    assert cell(board, "ahon_ln", ALPHA, A).within_1pt == pytest.approx(25.0)  # dist (1, .8, .4, -.4)
    assert cell(board, "ahon_ln", ALPHA, A).base_accuracy == pytest.approx(90.0)
    assert cell(board, "awft", ALPHA, A).within_1pt == pytest.approx(5.0)
    # an older run written later (a file added now, evaluated_at earlier) does not win
    older = sweep_rows(ALPHA, A, {"ahon_ln": (0, 5, 5, 5)}, request_id="older", at=T0 - timedelta(days=1))
    write_run(root, older, "older")
    assert cell(load_leaderboard(root), "ahon_ln", ALPHA, A).within_1pt == pytest.approx(25.0)


def test_a_newer_protocol_of_a_task_is_shown_and_the_other_noted(tmp_path):
    root = tmp_path / "store"
    write_run(root, sweep_rows(ALPHA, A, {"ahon_ln": (0, 0.5, 1.5, 4)}, request_id="0shot", at=T0), "a")
    five = sweep_rows(ALPHA, A, {"ahon_ln": (0, 2, 3, 5)}, request_id="5shot", at=T0 + timedelta(hours=1), shots=5)
    write_run(root, five, "b")
    write_run(root, sweep_rows(BETA, A, {"ahon_ln": (0, 0.5, 1.5, 4)}, request_id="beta", at=T0), "c")
    board = load_leaderboard(root)
    row = cell(board, "ahon_ln", ALPHA, A)
    assert row.shots == 5 and row.within_1pt == pytest.approx(5.0)
    assert any(
        "org/alpha winogrande: shown as its newest run (5-shot" in n and "left out: 0-shot" in n for n in board.notes
    )
    assert any(n.startswith("winogrande: models differ in protocol") for n in board.notes)


def test_revision_main_else_the_latest_checkpoint_in_training_order(tmp_path):
    root = tmp_path / "store"
    drops = {"ahon_ln": (0, 0.5, 1.5, 4)}
    # beta: step 1000 evaluated first, step 500 later: step 1000 is the most trained, it is shown
    write_run(root, sweep_rows(BETA, A, drops, request_id="b1", at=T0, revision="stage1-step1000-tokens4B"), "b1")
    late = sweep_rows(
        BETA,
        A,
        {"ahon_ln": (0, 2, 3, 5)},
        request_id="b2",
        at=T0 + timedelta(days=1),
        revision="stage1-step500-tokens2B",
    )
    write_run(root, late, "b2")
    # alpha: main and a later-evaluated intermediate checkpoint: main is shown
    write_run(root, sweep_rows(ALPHA, A, drops, request_id="a1", at=T0), "a1")
    mid = sweep_rows(
        ALPHA,
        A,
        {"ahon_ln": (0, 2, 3, 5)},
        request_id="a2",
        at=T0 + timedelta(days=1),
        revision="stage1-step500-tokens2B",
    )
    write_run(root, mid, "a2")
    board = load_leaderboard(root)
    assert board.revisions == {ALPHA: "main", BETA: "stage1-step1000-tokens4B"}
    assert cell(board, "ahon_ln", BETA, A).within_1pt == pytest.approx(15.0)
    assert any(n.startswith("org/beta is shown at stage1-step1000-tokens4B") for n in board.notes)
    board = load_leaderboard(root, revision="stage1-step500-tokens2B")
    assert board.revisions == {ALPHA: "stage1-step500-tokens2B", BETA: "stage1-step500-tokens2B"}
    assert cell(board, "ahon_ln", ALPHA, A).within_1pt == pytest.approx(5.0)
    board = load_leaderboard(root, revision="main")  # beta has no main: left out, with a note
    assert list(board.revisions) == [ALPHA] and any(
        "left out, not evaluated at main: org/beta" in n for n in board.notes
    )
    with pytest.raises(ConfigError, match="org/beta has no dynamic sweep of it"):
        load_leaderboard(root, models=[BETA], revision="main")
    with pytest.raises(ConfigError, match='no model has a dynamic sweep of it \\(did you mean "main"\\?\\)'):
        load_leaderboard(root, revision="mian")


def test_a_checkpoint_set_aside_as_a_duplicate_is_not_ranked(tmp_path):
    """A store from before the integrity audit may hold evaluations of a branch the audit later set aside (a copy
    of another step): they are left out, with a note, and the model is shown at its latest own checkpoint. A
    branch kept by `track --keep-duplicates` is ranked as before."""
    root = tmp_path / "store"
    drops = {"ahon_ln": (0, 0.5, 1.5, 4)}
    copy, own = "stage1-step1000-tokens4B", "stage1-step500-tokens2B"
    write_run(root, sweep_rows(BETA, A, drops, request_id="b1", at=T0, revision=copy), "b1")
    write_run(root, sweep_rows(BETA, A, {"ahon_ln": (0, 2, 3, 5)}, request_id="b2", at=T0, revision=own), "b2")
    write_run(root, sweep_rows(ALPHA, A, drops, request_id="a1", at=T0), "a1")
    assert load_leaderboard(root).revisions == {ALPHA: "main", BETA: copy}  # nothing set aside yet

    def set_aside(kept: bool) -> None:
        row = {"model_id": BETA, "revision": copy, "stage": 1, "step": 1000, "tokens": 4_000_000_000}
        row |= {"commit": None, "kind": "duplicate", "duplicate_of": own, "reason": f"the weights of {own}"}
        row |= {"kept": kept, "set_aside_at": T0, "request_id": None}
        write_table(root, "set_aside_checkpoints", [row], file_key="set_aside", model_id=BETA)

    set_aside(kept=False)
    board = load_leaderboard(root)
    assert board.revisions == {ALPHA: "main", BETA: own}
    assert cell(board, "ahon_ln", BETA, A).within_1pt == pytest.approx(5.0)  # the own checkpoint's curve
    assert f"{BETA}@{copy} left out: duplicate of {own} (set aside by the integrity audit)" in board.notes
    with pytest.raises(ConfigError, match="has no dynamic sweep of it"):
        load_leaderboard(root, models=[BETA], revision=copy)
    set_aside(kept=True)  # tracked anyway, marked: ranked as any checkpoint
    assert load_leaderboard(root).revisions == {ALPHA: "main", BETA: copy}


def test_filters_and_the_average_needs_every_task(store, tmp_path):
    board = load_leaderboard(store, models=[ALPHA, BETA], tasks=[A])
    assert {r.model for r in board.rows} == {ALPHA, BETA, AVERAGE_MODEL}
    assert {r.task for r in board.rows} == {A}  # one task: no across-task average
    assert cell(board, "ahon_ln", AVERAGE_MODEL, A).within_1pt == pytest.approx(20.0)  # (15 + 25) / 2
    with pytest.raises(ConfigError, match='--model org/alpa: no evaluations of it \\(did you mean "org/alpha"\\?\\)'):
        load_leaderboard(store, models=["org/alpa"])
    with pytest.raises(ConfigError, match='--tasks winogrand: .*did you mean "winogrande"'):
        load_leaderboard(store, tasks=["winogrand"])
    # a model swept on one of the two tasks: no average for it, a note; the others keep theirs
    root = tmp_path / "store"
    write_run(root, sweep_rows(ALPHA, A, DROPS[(ALPHA, A)], request_id="a", at=T0), "a")
    write_run(root, sweep_rows(ALPHA, B, DROPS[(ALPHA, B)], request_id="b", at=T0), "b")
    write_run(root, sweep_rows(BETA, A, DROPS[(BETA, A)], request_id="c", at=T0), "c")
    board = load_leaderboard(root)
    assert cell(board, "awft", ALPHA, AVERAGE_TASK).within_1pt == pytest.approx(10 / 3)
    assert not [r for r in board.rows if r.model == BETA and r.task == AVERAGE_TASK]
    assert cell(board, "awft", AVERAGE_MODEL, A).n_models == 2 and cell(board, "awft", AVERAGE_MODEL, B).n_models == 1
    assert "org/beta: no across-task average, not evaluated on piqa" in board.notes
    assert "| awft | Average (1 of 2 models) | piqa | 2.50 |" in format_leaderboard_table(board.rows, "markdown")
    board = load_leaderboard(root, models=[ALPHA, BETA], tasks=[B])
    assert list(board.revisions) == [ALPHA] and "org/beta left out: no dynamic sweep of piqa" in board.notes


def test_the_average_needs_the_same_quantiles(tmp_path):
    root = tmp_path / "store"
    write_run(root, sweep_rows(ALPHA, A, DROPS[(ALPHA, A)], request_id="a", at=T0), "a")
    other = [
        {**r, "quantile": r["quantile"] + 0.05} for r in sweep_rows(ALPHA, B, DROPS[(ALPHA, B)], request_id="b", at=T0)
    ]
    write_run(root, other, "b")
    board = load_leaderboard(root)
    assert not [r for r in board.rows if r.task == AVERAGE_TASK]
    assert any("no across-task average for ahon_ln, awft, lthon_ln" in n for n in board.notes)


def test_the_random_baseline_is_never_the_best(tmp_path):
    root = tmp_path / "store"
    drops = {"random": (0, 0, 0, 0.5), "ahon_ln": (0, 0.5, 1.5, 4)}
    write_run(root, sweep_rows(ALPHA, A, drops, request_id="a", at=T0), "a")
    board = load_leaderboard(root)
    assert cell(board, "random", ALPHA, A).within_1pt == 0.0  # never crosses ...
    assert cell(board, BEST, ALPHA, A).best_fn == "ahon_ln"
    drops = {"random": (0, 0.5, 0.5, 1.5), "ahon_ln": (0, 0.5, 1.5, 4)}  # ... and now the largest, 25 > 15
    write_run(root, sweep_rows(ALPHA, A, drops, request_id="b", at=T0 + timedelta(hours=1)), "b")
    board = load_leaderboard(root)
    assert cell(board, "random", ALPHA, A).within_1pt == pytest.approx(25.0)
    assert cell(board, BEST, ALPHA, A).best_fn == "ahon_ln"


def test_empty_and_static_only_stores_are_refused(tmp_path):
    store_folder(tmp_path / "empty", create=True)
    with pytest.raises(StoreError, match="holds no evaluations: run `dormant evaluate"):
        load_leaderboard(tmp_path / "empty")
    rows = sweep_rows(ALPHA, A, {"ahon_ln": (0, 0, 0, 0)}, request_id="s", at=T0)
    write_run(tmp_path / "static", [{**r, "mode": "static", "quantile": None} for r in rows[:1]], "s")
    with pytest.raises(StoreError, match="only static evaluations"):
        load_leaderboard(tmp_path / "static")


# ------------------------------------------------------------------------------------------- agreement


def test_one_spearman_function_and_it_is_scipys():
    """lb_agreement's rho has one source: scipy.stats.spearmanr behind `spearman` (no ranks of our own), NaN
    without a warning where it is undefined (fewer than 2 values, a constant side)."""
    import inspect
    import warnings

    assert not hasattr(rank_agreement, "average_ranks")
    assert "stats.spearmanr(" in inspect.getsource(rank_agreement.spearman)
    own = [
        n for n, f in inspect.getmembers(rank_agreement, inspect.isfunction) if f.__module__ == rank_agreement.__name__
    ]
    assert sorted(own) == ["agreement_task", "auc_agreement", "spearman"]
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (1, 2, 3, 5, 16, 40):
            for _ in range(20):
                a = rng.integers(0, 4, n).astype(float)  # many ties
                b = rng.normal(size=n)
                expected = stats.spearmanr(a, b).statistic if n > 1 and np.ptp(a) else math.nan
                got = spearman(a, b)
                assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)


def test_auc_agreement_against_scipy(store):
    board = load_leaderboard(store)
    models, rho = auc_agreement(board.rows)  # on the across-task average
    assert models == sorted([ALPHA, BETA, GAMMA]) and rho.shape == (3, 3)
    auc = {m: [cell(board, fn, m, AVERAGE_TASK).auc for fn in ("ahon_ln", "awft", "lthon_ln")] for m in models}
    for i, a in enumerate(models):
        for j, b in enumerate(models):
            assert rho[i, j] == pytest.approx(stats.spearmanr(auc[a], auc[b]).statistic, abs=1e-12)
    assert np.allclose(np.diag(rho), 1.0) and np.allclose(rho, rho.T)
    models, rho = auc_agreement(board.rows, task=A)
    auc = {m: [cell(board, fn, m, A).auc for fn in ("ahon_ln", "awft", "lthon_ln")] for m in models}
    assert rho[0, 1] == pytest.approx(stats.spearmanr(auc[models[0]], auc[models[1]]).statistic, abs=1e-12)


def test_auc_agreement_on_the_shared_functions(tmp_path):
    root = tmp_path / "store"
    # AUCs: alpha's lthon_ln 80 - 12.5 / 30, ahon_ln 80 - 40 / 30, awft 80 - 75 / 30 (trapezoid areas of the
    # drops); beta's lthon_ln 80, ahon_ln 80 - 25 / 30: on the two they share, both rank lthon_ln first
    write_run(root, sweep_rows(ALPHA, A, DROPS[(ALPHA, A)], request_id="a", at=T0), "a")
    beta = {"ahon_ln": (0, 1, 1, 1), "lthon_ln": (0, 0, 0, 0)}
    write_run(root, sweep_rows(BETA, A, beta, request_id="b", at=T0), "b")
    write_run(root, sweep_rows(GAMMA, A, {"awft": (0, 0, 0, 0)}, request_id="c", at=T0), "c")
    models, rho = auc_agreement(load_leaderboard(root).rows)
    assert models == [GAMMA, ALPHA, BETA]
    i = {m: k for k, m in enumerate(models)}
    assert rho[i[ALPHA], i[BETA]] == pytest.approx(1.0)
    assert math.isnan(rho[i[GAMMA], i[ALPHA]])  # one function shared: no correlation
    assert math.isnan(rho[i[GAMMA], i[GAMMA]])  # one function of its own


# ------------------------------------------------------------------------------------------------- CLI


def dormant(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(DORMANT), "leaderboard", *args], capture_output=True, text=True, timeout=120, cwd=cwd or REPO
    )


def test_cli_prints_each_format_and_draws_the_figure(store, tmp_path):
    proc = dormant("--store", str(store))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == format_leaderboard_table(load_leaderboard(store).rows, "markdown") + "\n"
    board = load_leaderboard(store, resampling=ItemResampling())
    # stderr: the notes (here: no run stored its items, so no interval), where the best function was chosen, and
    # the warnings of the values marked (!) in the table (a curve that dips and recovers)
    assert board.notes == ("no intervals: no shown run stored its items (evaluate with --log-samples)",)
    assert proc.stderr.splitlines() == [f"note: {n}" for n in (*board.notes, board.selection)] + [
        f"warning (!): {w}" for w in board.warnings
    ]
    proc = dormant("--store", str(store), "--format", "csv", "--model", ALPHA, GAMMA, "--tasks", A)
    assert proc.returncode == 0, proc.stderr
    table = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert {r["model"] for r in table} == {ALPHA, GAMMA, AVERAGE_MODEL} and {r["task"] for r in table} == {A}
    figure = tmp_path / "figs" / "agreement.png"
    proc = dormant("--store", str(store), "--format", "latex", "--figure", str(figure))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("\\begin{tabular}") and proc.stdout.rstrip().endswith("\\end{tabular}")
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"figure: {figure}" in proc.stderr
    assert not [p for p in figure.parent.iterdir() if p.name.startswith(".")]  # no temp file left


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "org/alpa"], 'no evaluations of it (did you mean "org/alpha"?)'),
        (["--model", ALPHA, "--figure", "x.png"], "needs 2 models or more; the board has 1 (org/alpha)"),
        (["--figure", "x.gif"], "--figure x.gif: name a .png, .svg or .pdf file"),
        (["--tasks", "mmlu"], "--tasks mmlu: no dynamic sweep of it"),
    ],
)
def test_cli_errors_are_one_line_exit_2(store, tmp_path, args, message):
    proc = dormant("--store", str(store), *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dormant leaderboard: error: ") and message in lines[0], lines
    assert not (tmp_path / "x.png").exists()


def test_cli_on_an_empty_or_missing_store(tmp_path):
    for store, message in ((tmp_path / "missing", "does not exist"), (tmp_path / "empty", "holds no evaluations")):
        if store.name == "empty":
            store_folder(store, create=True)
        proc = dormant("--store", str(store))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr


def test_cli_formats_mirror_the_library():
    from flows.cli.leaderboard import FORMATS as CLI_FORMATS

    assert tuple(CLI_FORMATS) == LEADERBOARD_FORMATS  # mirrored there, so that `--help` imports no pyarrow


def test_markdown_escapes_a_hostile_model_name(store):
    """A model id is the user's: raw HTML in it would be rendered by every Markdown viewer."""
    rows = [replace(r, model="<img src=x onerror=alert(1)>|x") for r in load_leaderboard(store).rows]
    text = format_leaderboard_table(rows, "markdown")
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;\\|x" in text
