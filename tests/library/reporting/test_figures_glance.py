"""Figures that read at a glance (issue 30, item 7), on hand-built stores (test_report.write_series)."""

from __future__ import annotations

import numpy as np

from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting.report import render_report
from tests.builders.stores import TOKENS, known_picture, with_quantile_ahon, write_series


def test_set_agreement_leaves_gaps_where_agreement_is_undefined():
    tokens = np.array([0, 10, 20, 30, 40])
    jaccard = {("a", "b"): np.array([np.nan, 1.0, np.nan, 0.5, 0.75])}
    (line,) = fg.draw_set_agreement(tokens, jaccard, "ahon_ln").axes[0].lines
    np.testing.assert_array_equal(line.get_xdata(), tokens)  # every checkpoint, undefined ones as NaN: a gap
    assert np.isnan(line.get_ydata()[[0, 2]]).all() and line.get_marker() == "o"  # a lone point stays visible


def test_dormant_percent_puts_the_quantile_raw_functions_in_their_own_panel():
    pct = np.array([[0.0, 10.0, 20.0], [0.0, 0.0, 0.0], [15.0, 40.0, 30.0]])
    fig = fg.draw_dormant_percent(np.array([0, 10, 100]), pct, ["ahon_ln", "lthon_ln", "ahon"], {"ahon"})
    top, bottom = fig.axes[:2]
    assert [line.get_label() for line in top.lines] == ["ahon_ln", "lthon_ln"]
    assert [line.get_label() for line in bottom.lines] == ["ahon"] and "quantile" in bottom.get_ylabel()
    assert top.get_ylim()[0] < 0  # the line at 0 is drawn above the axis, not on it
    assert len(fg.draw_dormant_percent(np.array([0, 10]), pct[:2, :2], ["ahon_ln", "lthon_ln"]).axes) == 1


def test_one_figure_per_finding_no_duplicate_file(tmp_path):
    d = known_picture()
    store = with_quantile_ahon(write_series(tmp_path / "store", {"ahon": d, "ahon_ln": d}, TOKENS))
    write_series(store, {"ahon": d, "ahon_ln": d}, TOKENS, calibration_id="wikipedia-4-def")
    result = render_report(store, out_dir=tmp_path / "report")
    names = {p.name for p in (result.out_dir / "figures").glob("*.png")}
    assert "set_agreement.png" in names and "findings_input.png" not in names
    page = (result.out_dir / "index.html").read_text()
    assert page.count('<img src="figures/set_agreement.png"') == 1  # shown once, with the findings
    assert "pools the pairs" in page and "mean over score functions" in page  # each agreement number named


def test_findings_print_plain_text_and_markdown_when_asked(tmp_path, capsys):
    """Issue 30 item 10: no raw `**Emergence.**` on a terminal; the Markdown of findings.md with --format markdown."""
    from flows.cli import main

    store = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)
    assert main(["findings", "--store", str(store)]) == 0
    text = capsys.readouterr().out
    assert "1. Emergence." in text and "**" not in text
    assert main(["findings", "--store", str(store), "--format", "markdown"]) == 0
    assert "1. **Emergence.**" in capsys.readouterr().out
