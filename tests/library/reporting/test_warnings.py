"""Warnings that matter (issue 11, point 6): a leaderboard at chance, taus that cannot mark what they aim at,
and the report's note on raw-unit functions with a quantile tau. Hand-made numbers and hand-built stores."""

from __future__ import annotations

import numpy as np
import pytest

from dormant_tasks.evaluation.metric import chance_note
from dormant_tasks.evaluation.sweep import item_step_note, item_step_pct
from dormant_tasks.evaluation.targets import format_leaderboard, single_target
from dormant_tasks.reporting.report import render_report
from dormant_tasks.reporting.series_data import load_series
from dormant_tasks.reporting.texts import report_markdown
from dormant_tasks.store.io import write_table
from dormant_tasks.tracking.masks import resolve_taus, tau_specs, tau_warnings
from tests.builders.stores import MODEL, TOKENS, known_picture, with_quantile_ahon, write_series

# ------------------------------------------------------------------------------------------- evaluate


def test_chance_note_on_hand_made_numbers():
    note = chance_note("winogrande", 100, 50.0, 0.5)
    assert note is not None and "50.00%" in note and "50% +/- 9.80 points on 100 items" in note
    assert chance_note("winogrande", 100, 59.0, 0.5) is not None  # inside 50 +/- 9.8
    assert chance_note("winogrande", 100, 61.0, 0.5) is None
    assert chance_note("winogrande", 1267, 75.0, 0.5) is None
    assert chance_note("winogrande", 1267, 52.0, 0.5) is not None  # 1.96 * sqrt(.25 / 1267) = 2.75 points
    # four choices: chance 25%, 1.96 * sqrt(.25 * .75 / 200) = 6.0 points; generation tasks have no chance level
    assert chance_note("mmlu", 200, 30.0, 0.25) is not None and chance_note("mmlu", 200, 32.0, 0.25) is None
    assert chance_note("gsm8k", 200, 0.0, None) is None


def test_item_step():
    assert item_step_pct(100) == pytest.approx(1.0)
    assert item_step_note(100).startswith("one item = 1.00 accuracy points (100 items), >= the metric's 1-point")
    assert item_step_note(1267) == "one item = 0.08 accuracy points (1267 items)"


def _rows(base, n_items):
    points = [(0.0, base), (0.1, base - 0.01), (0.2, base - 0.05)]
    return [
        {
            "task": "winogrande",
            "shots": 0,
            "mode": "dynamic",
            "score_fn": "ahon_ln",
            "quantile": q,
            "frac_zeroed": x,
            "accuracy": a,
            "n_items": n_items,
            "base_accuracy": base,
            "metric": "acc,none",
            "chat_template": False,
            "bos": "paper",
            "fewshot_split": None,
            "data_source": "bundled",
            "chance": 0.5,
        }
        for q, (x, a) in zip((0.0, 0.05, 0.1), points, strict=True)
    ]


def test_leaderboard_prints_the_item_step_and_the_chance_warning():
    target = single_target("org/model")
    at_chance = format_leaderboard(target, _rows(0.5, 100)).splitlines()  # stored fractions: 0.5 = 50%
    assert at_chance[1] == "winogrande: 100 items, 0-shot, acc,none, no chat template, BOS rule paper, data bundled"
    assert at_chance[-2].startswith("  one item = 1.00 accuracy points")
    assert at_chance[-1].startswith("  warning: base accuracy 50.00% is within the 95% binomial noise of chance")
    trained = format_leaderboard(target, _rows(0.75, 1267)).splitlines()
    assert trained[-1] == "  one item = 0.08 accuracy points (1267 items)"


# ------------------------------------------------------------------------------------------- taus

FNS = ("ftvvn", "ahon", "random")


def _reference(ftvvn):
    rng = np.random.default_rng(0)
    values = rng.random((16, len(FNS), 2, 4)) + 0.5  # [input, fn, layer, head]
    values[:, 0] = ftvvn
    values[:, 2] = rng.random((16, 2, 4))
    return values


def test_all_zero_reference_warns_and_a_spread_one_does_not():
    specs = tau_specs(FNS, ["random=0.5"])
    zeros = _reference(0.0)
    taus = resolve_taus(specs, zeros, FNS, "stage1-step90")
    assert taus["ftvvn"].value == 0.0
    (line,) = tau_warnings(taus, zeros, FNS)
    assert line.startswith("ftvvn: tau = 0 (quantile 0.15 of stage1-step90) puts 0.0% of the reference's")
    assert "--tau ftvvn=VALUE" in line and "drop ftvvn" in line

    spread = _reference(np.random.default_rng(1).random((16, 2, 4)))
    assert tau_warnings(resolve_taus(specs, spread, FNS, "stage1-step90"), spread, FNS) == []


def test_random_below_one_half_warns_even_without_reference_scores():
    taus = resolve_taus(tau_specs(["random", "ahon_ln"]))  # random's default p = 0.15
    (line,) = tau_warnings(taus)
    assert line.startswith("random: tau = p = 0.15 < 0.5") and "Binomial(n, 0.15)/n" in line
    assert tau_warnings(resolve_taus(tau_specs(["random"], ["random=0.5"]))) == []


# ------------------------------------------------------------------------------------------- report


def test_report_notes_raw_functions_with_a_quantile_tau(tmp_path):
    d = known_picture()
    root = with_quantile_ahon(write_series(tmp_path / "store", {"ahon": d, "ahon_ln": d}, TOKENS))
    md = report_markdown(load_series(root, MODEL))
    assert "Note: Raw-unit functions with a quantile tau: ahon (q = 0.15)." in md
    assert "stage1-step50-tokens4000000" in md and "not comparable with those of the \\_ln functions" in md
    html = render_report(root, MODEL, tmp_path / "report").index_html.read_text(encoding="utf-8")
    assert '<p class="note">Raw-unit functions with a quantile tau: ahon (q = 0.15).' in html


def test_no_note_for_ln_functions_alone(tmp_path):
    root = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)
    assert "Raw-unit" not in report_markdown(load_series(root, MODEL))
    html = render_report(root, MODEL, tmp_path / "report").index_html.read_text(encoding="utf-8")
    assert "Raw-unit" not in html


# ------------------------------------------------------------------------------------------- warnings travel


def _dipping(base=0.475, n_items=40, model=MODEL, revision="stage1-step50-tokens4000000"):
    """The issue's sweep: at chance on 40 items, and a curve that falls to 37.5% at 25% zeroed and rises back to
    47.5% at 30% (so its last crossing of base - 1 point, not the dip, is its '% zeroed within 1 point')."""
    from datetime import UTC, datetime

    points = [(0.0, base), (0.10, 0.475), (0.25, 0.375), (0.30, 0.475), (0.40, 0.30)]
    return [
        {
            **{"model_id": model, "revision": revision, "stage": 1, "step": 50, "tokens": 4_000_000},
            **_rows(base, n_items)[0],
            **{"quantile": float(q), "frac_zeroed": x, "accuracy": a, "code_version": "t", "request_id": "r"},
            "evaluated_at": datetime(2025, 1, 2, tzinfo=UTC),
        }
        for q, (x, a) in enumerate(points)
    ]


def test_a_curve_that_dips_and_recovers_is_warned_of():
    from dormant_tasks.evaluation.metric import recovery_note

    note = recovery_note([(0, 47.5), (10, 47.5), (25, 37.5), (30, 47.5), (40, 30)], 47.5)
    assert note.startswith("non-monotone curve: accuracy falls to 37.5% at 25.0% zeroed") and "47.5% at 30.0%" in note
    assert recovery_note([(0, 80), (10, 79.5), (20, 70), (30, 60)], 80) is None  # below once, stays below
    assert recovery_note([(0, 80), (10, 79.5)], 80) is None


def test_warnings_are_stored_with_the_rows_and_shown_by_leaderboard_and_report(tmp_path, capsys):
    from dormant_tasks.evaluation.metric import mark_warnings
    from dormant_tasks.store.io import read_table
    from flows.cli import main

    root = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)
    rows = _dipping()
    mark_warnings(rows)
    write_table(root, "evaluations", rows, file_key="sweep")
    stored = set(read_table(root, "evaluations").column("warnings").to_pylist())
    (text,) = stored
    assert "within the 95% binomial noise of chance" in text and "non-monotone curve" in text

    assert main(["leaderboard", "--store", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "| AUC (mean accuracy %) |" in out
    assert f"| ahon_ln | {MODEL} | winogrande | 30.57 (!) |" in out
    assert f"| ours (ahon_ln) | {MODEL} | winogrande | 30.57 (!) |" in out  # the best function keeps its warning
    assert f"warning (!): {MODEL} winogrande ahon_ln: base accuracy 47.50% is within" in err
    assert "non-monotone curve: accuracy falls to 37.5% at 25.0% zeroed" in err

    report = report_markdown(load_series(root, MODEL))
    assert "| ahon_ln | 30.57 (!) |" in report and "normalised AUC (mean accuracy %)" in report
    assert "Warning (!): base accuracy 47.50% is within the 95% binomial noise of chance" in report
    assert "Warning (!): non-monotone curve" in report
