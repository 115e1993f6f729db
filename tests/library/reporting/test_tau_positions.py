"""Where each fixed tau sits (docs/SCORES.md §4, "Where each tau sits"): its share of (input, head) pairs and
quantile at the reference checkpoint, shown in the report, with a warning under 1% or over 99%; and the page
comes from the Jinja2 template (escaped values, no string-built HTML)."""

from __future__ import annotations

import numpy as np
import pytest

from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting import page
from dormant_tasks.reporting.figure_data import series_tau_positions
from dormant_tasks.reporting.report import render_report
from dormant_tasks.reporting.series_data import load_series
from dormant_tasks.text import md
from tests.builders.stores import MODEL, write_series

N = 128


def store_with_rates(tmp_path):
    """3 checkpoints x 1 layer x 4 heads, per-head dormant rates of 128 inputs at every checkpoint:
    ahon_ln  0.0, 0.0, 0.0, 0.0   -> marks 0% of (input, head) pairs: warned (under 1%)
    lthon_ln 0.6, 0.2, 0.2, 0.2   -> marks 30%: its quantile 0.3
    aeqd_ln  1.0, 1.0, 1.0, 0.99  -> marks 99.75%: warned (over 99%)"""
    per_head = {"ahon_ln": [0.0, 0.0, 0.0, 0.0], "lthon_ln": [0.6, 0.2, 0.2, 0.2], "aeqd_ln": [1.0, 1.0, 1.0, 0.99]}
    rates = {fn: np.tile(np.array(r).reshape(1, 1, 4), (3, 1, 1)) for fn, r in per_head.items()}
    dormant = {fn: r >= 0.5 for fn, r in rates.items()}
    return write_series(tmp_path / "store", dormant, [0, 10, 100], rates=rates, n_inputs=N)


def test_tau_positions_are_the_mean_rate_at_the_reference_with_warnings(tmp_path):
    root = store_with_rates(tmp_path)
    series = load_series(root, MODEL)
    got = {p.score_fn: p for p in series_tau_positions(root, series)}
    last = series.revisions[-1]  # fixed taus recorded at no tracked checkpoint: the last one
    assert {p.reference_revision for p in got.values()} == {last}
    assert got["ahon_ln"].share == 0.0 and got["ahon_ln"].quantile == 0.0
    assert got["lthon_ln"].share == pytest.approx(0.3) and got["lthon_ln"].quantile == pytest.approx(0.3)
    assert got["aeqd_ln"].share == pytest.approx(0.9975)
    assert got["lthon_ln"].warning is None
    assert "marks almost nothing" in got["ahon_ln"].warning and "0.00%" in got["ahon_ln"].warning
    assert f"inactive at the reference checkpoint {last}:" in got["ahon_ln"].warning
    assert "marks almost everything" in got["aeqd_ln"].warning


def test_the_report_shows_where_each_tau_sits(tmp_path):
    root = store_with_rates(tmp_path)
    result = render_report(root, MODEL, out_dir=tmp_path / "report")
    html = result.index_html.read_text(encoding="utf-8")
    assert "<th>quantile of tau</th>" in html
    assert "<td>30.0% of (input, head) pairs</td><td>0.300</td>" in html
    assert html.count('<p class="note">ahon_ln: tau') == 1 and '<p class="note">aeqd_ln: tau' in html
    assert "| lthon_ln | stage1-step20-tokens100 | 30.0% | 0.300 |" in result.markdown
    assert f"Warning: {md('ahon_ln: tau (score < 0.5, fixed) marks 0.00%')}" in result.markdown  # escaped: Markdown


def test_the_page_is_the_template_with_every_value_escaped(tmp_path):
    root = store_with_rates(tmp_path)
    series = load_series(root, MODEL)
    fig = {k: k for k in ("dormant_percent", "raster", "layers", "scores", "agreement")}
    rows = [
        {
            "score_fn": "ahon_ln",
            "first_dormant_revision": "<b>x</b>",
            "first_dormant_tokens": 0,
            "final_pct_dormant": 0.0,
            "fell_dormant": 0,
            "woke": 0,
            "confident": 0,
            "blips": 0,
            "heads_ever_changed": 0,
        }
    ]
    html = page.report_html(page.ReportPage(series, "ahon_ln", fig, rows, []))
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "A single checkpoint: no transitions yet." in html  # no "transitions" figure given
    assert not hasattr(fg, "report_html")  # figures.py only draws


def test_the_terminal_and_the_report_give_the_same_tau_warnings_naming_their_set(tmp_path, capsys):
    """One source of tau warnings (tracking.tau_positions): what `track` prints after a run or a rerun is what the
    report shows, each line naming its calibration set."""
    from types import SimpleNamespace

    from dormant_tasks.tracking.positions import tau_warnings_of
    from dormant_tasks.tracking.series import SeriesView
    from flows.cli.track import stored_tau_warnings

    root = store_with_rates(tmp_path)
    calibration_id = SeriesView.open(root, MODEL).calibration_id
    report_lines = [p.warning for p in series_tau_positions(root, load_series(root, MODEL)) if p.warning]
    assert len(report_lines) == 2  # ahon_ln (nothing) and aeqd_ln (everything)
    assert tau_warnings_of(root, MODEL) == [f"calibration set {calibration_id}: {w}" for w in report_lines]
    result = SimpleNamespace(store=root, model_id=MODEL, warnings=("computed when the taus were fixed",))
    assert stored_tau_warnings(result) == tau_warnings_of(root, MODEL)
    markdown = render_report(root, MODEL, out_dir=tmp_path / "report").markdown
    assert all(md(w) in markdown for w in report_lines)
    # nothing stored for the series: the run's own warnings
    assert stored_tau_warnings(SimpleNamespace(store=root, model_id="other", warnings=("w",))) == ["w"]


def test_tau_warnings_are_one_line_per_function_across_calibration_sets(tmp_path):
    """Two calibration sets whose ahon_ln and aeqd_ln taus warn on both: one line per function naming both sets
    (the advice said once), each set's own numbers kept where they differ (issue 43: 14 lines for 2 sets)."""
    from dormant_tasks.tracking.positions import tau_warnings_of
    from dormant_tasks.tracking.series import SeriesView

    root = store_with_rates(tmp_path)
    per_head = {"ahon_ln": [0.0, 0.0, 0.0, 0.02], "lthon_ln": [0.6, 0.2, 0.2, 0.2], "aeqd_ln": [1.0, 1.0, 1.0, 0.99]}
    rates = {fn: np.tile(np.array(r).reshape(1, 1, 4), (3, 1, 1)) for fn, r in per_head.items()}
    write_series(
        root, {fn: r >= 0.5 for fn, r in rates.items()}, [0, 10, 100], rates=rates, n_inputs=N, calibration_id="cal-b"
    )
    first = SeriesView.open(root, MODEL).calibration_id
    lines = tau_warnings_of(root, MODEL)
    assert len(lines) == 2  # not 4: ahon_ln and aeqd_ln, each once
    ahon, aeqd = sorted(lines, key=lambda line: "aeqd_ln" in line)
    assert ahon.startswith(
        f"calibration sets {first} and cal-b: ahon_ln: tau (score < 0.5, fixed) marks 0.00% ({first}), 0.50% (cal-b) "
        "of the (input, head) pairs inactive"
    )
    assert ahon.count("ahon_ln marks almost nothing") == 1 and ahon.count("tau (") == 1
    assert aeqd.startswith(f"calibration sets {first} and cal-b: aeqd_ln: tau (score < 0.5, fixed) marks 99.75%")
    assert aeqd.count("marks 99.75%") == 1 and aeqd.count("aeqd_ln marks almost everything") == 1


def test_a_reference_that_is_not_tracked_is_named_as_such(tmp_path):
    """A run of part of a series (`--steps :50`) fixes its quantile taus at the series' last checkpoint, which it
    does not track: the positions are measured at the last tracked one, and the warning says so rather than
    calling that one the reference."""
    from dormant_tasks.store import read_table, write_table

    root = store_with_rates(tmp_path)
    taus = read_table(root, "taus", model_id=MODEL)
    far = "stage1-step600-tokens307K"
    column = taus.schema.get_field_index("reference_revision")
    taus = taus.set_column(column, taus.schema.field(column), [[far] * taus.num_rows])
    write_table(root, "taus", taus, file_key=next((root / "taus").rglob("*.parquet")).stem, model_id=MODEL)
    series = load_series(root, MODEL)
    got = {p.score_fn: p for p in series_tau_positions(root, series)}
    last = series.revisions[-1]
    assert got["lthon_ln"].reference_revision == last and got["lthon_ln"].share == pytest.approx(0.3)
    assert f"inactive at the last tracked checkpoint {last} (the reference, {far}, is not tracked)" in (
        got["ahon_ln"].warning
    )
