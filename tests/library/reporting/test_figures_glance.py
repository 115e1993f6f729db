"""Figures that read at a glance (issue 30, item 7), on hand-built stores (test_report.write_series)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting import set_figures as sf
from dormant_tasks.reporting.report import render_report
from tests.builders.stores import MODEL, TOKENS, known_picture, with_quantile_ahon, write_series


def test_set_agreement_leaves_gaps_where_agreement_is_undefined():
    tokens = np.array([0, 10, 20, 30, 40])
    jaccard = {("a", "b"): np.array([np.nan, 1.0, np.nan, 0.5, 0.75])}
    line, floor = sf.draw_set_agreement(tokens, jaccard, "ahon_ln").axes[0].lines
    assert floor.get_label() == "noise floor: not measured" and not len(floor.get_xdata())  # said, not drawn
    np.testing.assert_array_equal(line.get_xdata(), tokens)  # every checkpoint, undefined ones as NaN: a gap
    assert np.isnan(line.get_ydata()[[0, 2]]).all() and line.get_marker() == "o"  # a lone point stays visible


def test_dormant_percent_puts_the_quantile_raw_functions_in_their_own_panel():
    pct = np.array([[0.0, 10.0, 20.0], [0.0, 0.0, 0.0], [15.0, 40.0, 30.0]])
    fig = fg.draw_dormant_percent(np.array([0, 10, 100]), pct, ["ahon_ln", "lthon_ln", "ahon"], {"ahon"})
    top, bottom = fig.axes[:2]
    assert [line.get_label() for line in top.lines] == ["ahon_ln: 20% at the end", "lthon_ln: 0% throughout"]
    assert [line.get_label() for line in bottom.lines] == ["ahon: 30% at the end"] and "quantile" in bottom.get_ylabel()
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


def _outside(fig, legend, ax) -> bool:
    """The legend's box lies wholly right of the axes' (drawn: the boxes are the rendered ones)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)  # the constrained layout placed
    return legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_dormant_percent_legend_names_the_lines_as_they_end_outside_the_data():
    """Issue 43: lines at 0% lie on one another and a legend over the data hides them; the legend sits beside
    the plot and lists the lines as they end, highest first, each with its last value."""
    pct = np.array([[0.0, 0.0, 0.0], [0.0, 5.0, 12.5], [0.0, 0.0, 0.0], [0.0, 30.0, 25.0]])
    fns = ["awft", "ahon_ln", "random", "lthon_ln"]
    fig = fg.draw_dormant_percent(np.array([0, 10, 100]), pct, fns)
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [
        "lthon_ln: 25% at the end",
        "ahon_ln: 12.5% at the end",
        "awft: 0% throughout",
        "random: 0% throughout",
    ]
    assert _outside(fig, ax.get_legend(), ax)


def test_score_band_draws_the_dormant_heads_over_it():
    """Issue 43: the 10-90% band cuts off the tail where the dormant heads are; each head ever dormant is drawn
    over it, a dot where it is dormant, and the legend sits beside the plot."""
    from dormant_tasks.reporting.figure_data import dormant_traces, score_bands
    from dormant_tasks.reporting.series_data import load_series

    d = known_picture()  # [checkpoint, layer, head]
    series = load_series(write_series(Path(tempfile.mkdtemp()) / "s", {"ahon_ln": d}, TOKENS), None)
    traces = dormant_traces(series, "ahon_ln")
    ever = d.reshape(len(TOKENS), -1).any(axis=0)  # [head]
    assert traces.n_ever == int(ever.sum()) == len(traces.labels) > 0
    i = series.fn_index("ahon_ln")
    for label, row, states in zip(traces.labels, traces.scores, traces.dormant):
        layer, head = (int(x) for x in label[1:].split(".H"))
        h = layer * series.n_heads + head
        assert ever[h] and np.array_equal(row, series.score[i][h]) and np.array_equal(states, series.dormant[i][h] == 1)
    fig = fg.draw_score_bands(series.tokens, score_bands(series, "ahon_ln"), 0.5, "ahon_ln", traces)
    (ax,) = fig.axes
    red = [line for line in ax.lines if line.get_color() == "C3" and len(line.get_xdata())]
    dots = [line for line in red if line.get_linestyle() == "None"]
    assert len(red) == 2 * traces.n_ever and len(dots) == traces.n_ever
    assert sum(len(line.get_xdata()) for line in dots) == int(traces.dormant.sum())  # a dot where dormant
    assert any("ever dormant" in t.get_text() for t in ax.get_legend().get_texts())
    assert _outside(fig, ax.get_legend(), ax)


def test_set_agreement_shows_the_head_counts_and_the_noise_floor():
    """Issue 43: a Jaccard of 1 head reads like one of 20; the counts it rests on are drawn below it, and the
    noise floor (same-kind agreement, with its interval) is marked at its checkpoint."""
    from dormant_tasks.findings.dependence import NoiseFloor
    from dormant_tasks.statistics import Estimate

    tokens = np.array([0, 10, 20])
    jaccard = {("a", "b"): np.array([np.nan, 1.0, 0.5])}
    union = {("a", "b"): np.array([0, 1, 20])}
    est = lambda v: Estimate(v, v - 0.1, v + 0.1, "bootstrap over clusters", "Jaccard", 40)  # noqa: E731
    floor = NoiseFloor("step20", 64, 40, False, est(0.6), est(0.5), est(-0.1), 0.3, 999)
    fig = sf.draw_set_agreement(tokens, jaccard, "ahon_ln", union, floor)
    top, below = fig.axes
    (counts,) = below.lines
    np.testing.assert_array_equal(counts.get_ydata(), [0, 1, 20])
    assert "either set" in below.get_ylabel()
    (legend,) = fig.legends  # under the figure, outside the data
    labels = [t.get_text() for t in legend.get_texts()]
    assert "noise floor at step20: same-kind agreement 0.60 (95% CI 0.50–0.70)" in labels


def test_a_tau_that_marks_nothing_is_said_so_with_the_tau(tmp_path):
    """Issue 43: `findings --scores awft` said "no head is ever dormant" as if the heads were all active; when
    the function's tau marks no head at any checkpoint, the findings say so, with the tau."""
    from dormant_tasks.findings.dynamics import series_findings
    from dormant_tasks.reporting.texts import findings_lines

    d = known_picture()
    store = write_series(tmp_path / "store", {"ahon_ln": d, "awft": np.zeros_like(d)}, TOKENS)
    text = " ".join(findings_lines(series_findings(store, MODEL, "awft"), esc=str))
    assert (
        f"no head is ever dormant: awft's tau (inactive if score < 0.5) marks no head at any of the {len(TOKENS)} "
        "checkpoints" in text
    )
    assert "marks no head" not in " ".join(findings_lines(series_findings(store, MODEL, "ahon_ln"), esc=str))


def test_the_dormant_percent_caption_names_only_the_panels_drawn(tmp_path):
    """Issue 43: the served report's caption named a second panel (the raw quantile functions) that was not
    drawn; it is named, with its functions, only when it is."""
    d = known_picture()
    fixed = write_series(tmp_path / "fixed", {"ahon_ln": d, "lthon_ln": d}, TOKENS)
    page = (render_report(fixed, out_dir=tmp_path / "r1").out_dir / "index.html").read_text()
    assert "panel of their own" not in page and "layer-normalised _ln dashed" in page
    assert "raw scores solid" not in page and "head-normalised" not in page  # only the styles drawn
    both = with_quantile_ahon(write_series(tmp_path / "both", {"ahon": d, "ahon_ln": d}, TOKENS))
    page = (render_report(both, out_dir=tmp_path / "r2").out_dir / "index.html").read_text()
    assert "own scores (ahon) are in a panel of their own below" in page


def _head_view_json(html: str) -> dict:
    import json
    import re

    (data,) = re.findall(r'<script type="application/json" id="head-data">(.*?)</script>', html, re.S)
    return json.loads(data)


def test_the_report_has_a_per_head_view_with_every_heads_scores_and_its_tau(tmp_path):
    """Issue 43: each head's score over training with its tau, picked in the page (data inline, drawn by a
    small script: no server), and a line in summary.md saying where it is."""
    from dormant_tasks.reporting.series_data import load_series

    d = known_picture()
    store = write_series(tmp_path / "store", {"ahon_ln": d}, TOKENS)
    result = render_report(store, out_dir=tmp_path / "report")
    html = result.index_html.read_text()
    assert '<select id="head-select">' in html and 'id="head-plot"' in html
    view = _head_view_json(html)
    series = load_series(store, None)
    i = series.fn_index("ahon_ln")
    assert view["fn"] == "ahon_ln" and view["tau"] == 0.5 and view["direction"] == "<"
    assert view["revisions"] == series.revisions and len(view["heads"]) == series.n_layers * series.n_heads
    np.testing.assert_allclose(np.array(view["scores"], dtype=float), series.score[i], rtol=1e-3)
    assert view["states"] == ["".join("1" if x == 1 else "0" for x in row) for row in series.dormant[i]]
    assert "per-head view of index.html" in result.summary_md.read_text()


def test_the_per_head_view_stays_a_few_megabytes_at_1024_heads_and_300_checkpoints():
    """The inline data at a 32-layer x 32-head model and 300 checkpoints, measured (4 significant
    digits per score, one character per state): 2.3 MB, 3.8 MB at 500 checkpoints."""
    from types import SimpleNamespace

    from dormant_tasks.reporting.figure_data import head_view
    from dormant_tasks.reporting.page import script_json

    rng = np.random.default_rng(0)
    n_heads, n_ckpt = 1024, 300
    score = rng.lognormal(size=(1, n_heads, n_ckpt))
    series = SimpleNamespace(
        fn_index=lambda fn: 0,
        taus={"ahon_ln": (0.5, "<")},
        score=score,
        dormant=(score < 0.5).astype(np.int8),
        revisions=[f"stage1-step{k}-tokens{k}B" for k in range(n_ckpt)],
        tokens=np.arange(n_ckpt) * 10**9,
        n_heads=32,
    )
    size = len(script_json(head_view(series, "ahon_ln")).encode())
    assert 1_000_000 < size < 4_000_000, size
    assert "</" not in script_json({"x": "</script><script>alert(1)</script>"})  # cannot end its element


def test_the_bar_and_curve_legends_sit_under_the_figure_not_on_the_data():
    """Issue 43: a legend in a corner of the axes covered a bar (transitions) or the curve's end (emergence)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from dormant_tasks.reporting.figure_data import TransitionCounts

    counts = TransitionCounts(["b", "c", "d"], np.array([1, 0, 1]), np.array([0, 1, 0]))
    fig = fg.draw_transition_bars(counts, np.array([10, 20, 30]), "ahon_ln")
    (ax,) = fig.axes
    (legend,) = fig.legends
    assert ax.get_legend() is None
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    assert legend.get_window_extent(renderer).y1 <= ax.get_window_extent(renderer).y0


def test_the_rate_figure_draws_each_changed_heads_stored_rate_and_interval(tmp_path):
    """Issue 60, item 6: the interval stored with each checkpoint's dormant rate (dormant_rate_low/high) is drawn,
    as a band around the rate, for the heads whose mask changed, with a star on each confident transition."""
    from dormant_tasks.reporting.figure_data import rate_intervals
    from dormant_tasks.reporting.series_data import load_series
    from dormant_tasks.statistics import wilson_interval

    d = known_picture()  # [checkpoint, layer, head]: L0.H0 falls dormant at 1; L1.H2 falls at 3 and wakes at 5
    n = 16
    rates = np.where(d, 12, 3) / n + np.arange(len(TOKENS))[:, None, None] % 2 / n  # k / 16, >= 0.5 where dormant
    store = write_series(tmp_path / "store", {"ahon_ln": d}, TOKENS, rates={"ahon_ln": rates}, n_inputs=n)
    series = load_series(store, None)
    r = rate_intervals(series, "ahon_ln")
    assert sorted(r.labels) == ["L0.H0", "L1.H2"] and r.n_changed == 2  # the heads whose mask changed, only
    for k, label in enumerate(r.labels):
        layer, head = int(label[1]), int(label[-1])
        np.testing.assert_allclose(r.rate[k], rates[:, layer, head])
        interval = np.array([wilson_interval(round(x * n), n) for x in rates[:, layer, head]])  # as stored
        np.testing.assert_allclose(np.c_[r.low[k], r.high[k]], interval)
        h = layer * series.n_heads + head
        np.testing.assert_array_equal(r.confident[k], series.confident[0, h] & (series.marks[0, h] != 0))
    fig = fg.draw_rate_intervals(series.tokens, r, "ahon_ln")
    bands = [c for c in fig.axes[0].collections if len(c.get_paths())]  # the interval's band
    assert len(bands) == 1 and fig.axes[0].get_title() == r.labels[0]
    assert "2 heads whose mask changed" in fig._suptitle.get_text()
    result = render_report(store, out_dir=tmp_path / "report")
    assert "rates_ahon_ln" in result.figures and 'src="figures/rates_ahon_ln.png"' in result.index_html.read_text()

    still = write_series(tmp_path / "still", {"ahon_ln": np.zeros_like(d)}, TOKENS)  # no head changes: said
    r = rate_intervals(load_series(still, None), "ahon_ln")
    assert r.labels == [] and r.n_changed == 0
    assert (
        "no head's mask changed" in fg.draw_rate_intervals(np.array(TOKENS), r, "ahon_ln").axes[0].texts[0].get_text()
    )
