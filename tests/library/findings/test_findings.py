"""The paper's three findings measured on a store (docs/SCORES.md §7): a hand-built series with known emergence
steps, transitions and calibration-set agreement gives the hand-computed numbers, `dormant status` agrees,
and the report and `dormant findings` state them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import chi2

from dormant_tasks.findings.dynamics import (
    path_to,
    path_tokens,
    poisson_interval,
    series_findings,
    stable_index,
)
from dormant_tasks.reporting.figure_data import summary_rows
from dormant_tasks.reporting.findings_report import write_findings
from dormant_tasks.reporting.report import render_report
from dormant_tasks.reporting.texts import findings_lines
from flows.cli import main
from flows.cli.status import series_line
from tests.builders.stores import CAL, MODEL, write_series

TOKENS = [0, 50_000, 100_000, 200_000, 500_000, 1_000_000]
N = 128


def picture() -> np.ndarray:
    """6 checkpoints x 1 layer x 4 heads (A active, D dormant):
    head 0: A D D D D D  dormant for good from checkpoint 1 (50K tokens, within the first 10% = 100K)
    head 1: A D A D D D  for good from checkpoint 3 (200K), settled (>= 80% dormant from then on) from 1; three
                         changes
    head 2: A A A A A D  for good from checkpoint 5 (1M)
    head 3: D D A A A A  active at the end"""
    d = np.zeros((6, 1, 4), dtype=bool)
    d[1:, 0, 0] = True
    d[[1, 3, 4, 5], 0, 1] = True
    d[5, 0, 2] = True
    d[:2, 0, 3] = True
    return d


def rates(d: np.ndarray) -> np.ndarray:
    """Rates 0 or 1 (intervals exclude 0.5), except head 1 at checkpoint 2: 0.45 of 128, active but unsure."""
    r = d.astype(float)
    r[2, 0, 1] = 0.45
    return r


def hand_store(tmp_path, second_set: bool = True):
    d = picture()
    root = write_series(tmp_path / "store", {"ahon_ln": d}, TOKENS, rates={"ahon_ln": rates(d)}, n_inputs=N)
    if second_set:
        b = d.copy()
        b[5, 0, 2] = False  # set b: head 2 does not fall dormant at the end
        write_series(root, {"ahon_ln": b}, TOKENS, rates={"ahon_ln": rates(b)}, n_inputs=N, calibration_id="cal-b")
    return root


def test_path_tokens_count_along_branches_and_restarting_stages():
    # stage 1: 100, 200; ingredient 1 (own counts 10, 20) from checkpoint 1; ingredient 2 (own count 5) from 1; main
    tokens = np.array([100, 200, 10, 20, 5, -1])
    stage = np.array([1, 1, 2, 2, 2, -1])
    pred = np.array([-1, 0, 1, 2, 1, 4])
    assert path_tokens(tokens, stage, pred).tolist() == [100, 200, 210, 220, 205, 205]
    assert path_to(4, pred).tolist() == [0, 1, 4]


def test_dormant_for_good_is_the_start_of_the_last_dormant_run():
    d = picture()[:, 0, :]  # [checkpoint, head]
    assert stable_index(d, 1.0).tolist() == [1, 3, -1, -1]  # head 2, dormant at the last checkpoint only: censored
    assert stable_index(d, 1.0, min_run=1).tolist() == [1, 3, 5, -1]
    assert stable_index(np.ones((3, 1), bool), 1.0).tolist() == [0]


def test_poisson_interval_matches_the_chi_square_form():
    for k in (0, 1, 4, 37, 500):
        low, high = poisson_interval(k)
        assert low == pytest.approx(chi2.ppf(0.025, 2 * k) / 2 if k else 0.0, abs=1e-9)
        assert high == pytest.approx(chi2.ppf(0.975, 2 * k + 2) / 2, rel=1e-9)


def test_the_hand_built_rate_over_a_billion_tokens_is_the_hand_computed_one(tmp_path):
    """The hand-built series over a thousand times the tokens (1B, the least a rate is stated from): 4 confident."""
    d = picture()
    tokens = [t * 1000 for t in TOKENS]
    root = write_series(tmp_path / "store", {"ahon_ln": d}, tokens, rates={"ahon_ln": rates(d)}, n_inputs=N)
    (stage,) = series_findings(root, MODEL).transitions.stages
    assert (stage.n_confident, stage.tokens) == (4, 10**9)
    low, high = poisson_interval(4)
    assert (stage.poisson.value, stage.poisson.low, stage.poisson.high) == pytest.approx((4.0, low, high))
    assert stage.per_billion.value == pytest.approx(4.0) and stage.per_billion.too_few  # one layer


def test_findings_on_a_hand_built_store_give_the_hand_computed_numbers(tmp_path):
    f = series_findings(hand_store(tmp_path), MODEL)
    assert (f.score_fn, f.calibration_id, f.n_checkpoints) == ("ahon_ln", CAL, 6)

    e = f.emergence
    assert (e.pct_dormant_first, e.pct_dormant_last) == (25.0, 75.0)
    assert e.first_dormant_tokens == 0 and e.final_tokens == 1_000_000
    # head 2 is dormant at the last checkpoint only: not settled yet, right-censored with head 3 (never settled)
    assert e.heads == ["L0.H0", "L0.H1"] and e.n_censored == 2
    assert e.first_tokens.tolist() == [50_000, 50_000]
    # head 1's blip at checkpoint 2 does not push it to 200K: dormant at 4 of the 5 checkpoints from 50K on
    assert e.settled_tokens.tolist() == [50_000, 50_000]
    assert e.early_tokens == 100_000
    assert (e.early.k, e.early.n) == (2, 2)  # both have settled by 10% of the tokens
    # one layer: no interval over layers, and it says why
    assert math.isnan(e.early.low) and e.early.n_units == 1 and e.early.too_few
    assert e.settled_median.value == 50_000 and e.settled_fraction.value == pytest.approx(0.05)
    assert math.isnan(e.settled_median.low) and e.settled_median.too_few  # one layer
    # over all 4 heads, 2 censored: half have settled by 50K (the Kaplan-Meier median)
    assert e.settled_median_all.value == 50_000

    t = f.transitions
    # head 0 fell at 1; head 1 fell at 1, woke at 2, fell at 3; head 2 fell at 5; head 3 woke at 2
    assert (t.n_transitions, t.fell_dormant, t.woke) == (6, 4, 2)
    # head 1 is undetermined at checkpoint 2 (0.45 of 128): it stays confidently dormant from 1 on, so its changes
    # into 2 and 3 are not confident; its change into 1 is undone at 2 and the one into 2 at 3: two mask blips,
    # neither with both legs confident
    assert (t.n_confident, t.n_blips, t.n_confident_blips) == (4, 2, 0)
    assert (t.n_heads, t.n_selected, t.method) == (4, 4, "bh")
    assert t.undetermined.k == 1 and t.undetermined.n == 24
    assert t.state_level == pytest.approx(0.05 * 4 / (4 * 6))
    (stage,) = t.stages
    assert (stage.stage, stage.n_transitions, stage.n_confident, stage.tokens) == (1, 6, 4, 1_000_000)
    # 1M tokens, under findings.MIN_RATE_TOKENS: the rate is withheld (tests/library/findings/test_rate_minimum.py
    # checks it past the minimum: 4 confident over 1B tokens there)
    assert math.isnan(stage.poisson.value) and math.isnan(stage.per_billion.value)
    assert stage.spacing.value == 100_000 and (stage.spacing.low, stage.spacing.high) == (50_000, 500_000)
    assert (t.ever_changed.k, t.ever_changed.n) == (4, 4)
    assert (t.more_than_once.k, t.more_than_once.n) == (1, 4)  # head 1
    assert (t.confidently_changed.k, t.n_paired, t.fdr) == (4, 0, 0.05)  # no indicators kept here
    assert t.interval_spacing.tolist() == np.diff(TOKENS).tolist() and t.interval_steps.tolist() == [10] * 5
    assert t.confidently_more_than_once == 0  # head 1 has one confident transition
    assert t.interval_tokens.tolist() == TOKENS[1:]
    assert t.interval_confident.tolist() == [2, 1, 0, 0, 1]  # heads 0, 1 at 1; head 3 at 2; head 2 at 5
    assert (t.interval_confident + t.interval_other).tolist() == [2, 2, 1, 0, 1]
    by = series_findings(hand_store(tmp_path / "by"), MODEL, fdr_method="by").transitions
    assert by.method == "by" and by.state_level < t.state_level and by.n_confident <= t.n_confident

    d = f.input_dependence
    assert d.measured and d.calibration_ids == [CAL, "cal-b"]
    # checkpoint 0: both sets {3}: 1; ...; checkpoint 5: a = {0, 1, 2}, b = {0, 1}: 2 / 3
    assert d.jaccard.tolist() == pytest.approx([1, 1, 1, 1, 1, 2 / 3])
    assert d.first == (f"stage1-step0-tokens{TOKENS[0]}", 1.0)
    assert d.last.value == pytest.approx(2 / 3) and (d.all_of_any.k, d.all_of_any.n) == (2, 3)
    assert d.last.low <= 2 / 3 <= d.last.high
    # this store keeps no per-input indicators: the noise floor says so instead of a number
    assert d.noise_floor is None and "keeps no per-input indicators" in d.noise_floor_note


def test_input_dependence_is_undefined_where_no_set_marks_a_head(tmp_path):
    d = np.zeros((3, 1, 2), dtype=bool)
    d[2, 0, 0] = True
    root = write_series(tmp_path / "s", {"ahon_ln": d}, [0, 10, 100])
    write_series(root, {"ahon_ln": d}, [0, 10, 100], calibration_id="cal-b")
    dep = series_findings(root, MODEL).input_dependence
    assert np.isnan(dep.jaccard[:2]).all() and dep.jaccard[2] == 1.0  # empty masks: undefined, not 1
    assert dep.first == ("stage1-step20-tokens100", 1.0)


def test_findings_agree_with_status_and_the_report(tmp_path):
    root = hand_store(tmp_path)
    f = series_findings(root, MODEL)
    line = series_line(root, MODEL).splitlines()[0]
    e, t = f.emergence, f.transitions
    assert f"ahon_ln dormant {e.pct_dormant_first:.1f}% -> {e.pct_dormant_last:.1f}%" in line
    # every number of the line is ahon_ln's; the whole series' count is said as such (before: "transitions 10
    # ahon_ln / 162 total (136 confident ...)", the confident count over every function beside ahon_ln's)
    blips = f"{t.n_blips} blip" + ("s" if t.n_blips != 1 else "")
    assert (
        f"ahon_ln transitions {t.n_transitions} ({t.n_confident} confident at BH q <= 0.05 over 4 heads, {blips})"
        in line
    )
    assert f"{t.n_transitions} transitions over all 1 function," in line

    report = render_report(root, MODEL, out_dir=tmp_path / "report")
    (row,) = [r for r in summary_rows_of(root) if r["score_fn"] == "ahon_ln"]
    assert (row["fell_dormant"], row["woke"], row["confident"], row["blips"]) == (
        t.fell_dormant,
        t.woke,
        t.n_confident,
        t.n_blips,
    )
    assert row["final_pct_dormant"] == e.pct_dormant_last
    html = report.index_html.read_text(encoding="utf-8")
    assert "<h2>Findings</h2>" in html
    for name in ("findings_emergence", "findings_transitions", "set_agreement"):  # input dependence: set_agreement
        assert f"figures/{name}.png" in html and name in report.figures
    assert "## Findings" in report.markdown
    for text in findings_lines(f):
        if text:
            assert text in report.markdown


def summary_rows_of(root):
    from dormant_tasks.reporting.series_data import load_series

    return summary_rows(load_series(root, MODEL))


def test_single_set_says_input_dependence_is_not_measured(tmp_path):
    store = hand_store(tmp_path, second_set=False)
    f = series_findings(store, MODEL)
    assert not f.input_dependence.measured
    text = "\n".join(findings_lines(f))
    assert "Not measured" in text and "--calibration" in text
    out = write_findings(f, tmp_path / "findings", store)
    assert sorted(out.figures) == ["findings_emergence", "findings_transitions"]
    assert out.summary_md.read_text(encoding="utf-8").startswith(f"# Findings: {MODEL}")


def test_cli_findings(tmp_path, capsys):
    root = hand_store(tmp_path)
    assert main(["findings", "--store", str(root), "--reports-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    # plain text by default (no raw Markdown on a terminal); `--format markdown` gives findings.md's text
    assert "1. Emergence." in out and "2. Transitions." in out and "3. Input dependence." in out and "**" not in out
    assert "2 of 2 settled heads (100.0%, no interval" in out  # and why no interval, once in its paragraph:
    assert "no interval: 1 layer, fewer than 5" in out
    assert "per head: L0.H0 at 50K, L0.H1 at 50K." in out  # each head's token count
    assert "Benjamini-Hochberg q <= 0.05 over 4 heads" in out and "2 had not by the end (right-censored)" in out
    assert "depends on how densely the checkpoints are spaced" in out
    assert "Noise floor: not measured" in out
    assert (tmp_path / "out" / "figures" / "findings_emergence.svg").is_file()
    assert main(["findings", "--store", str(root), "--format", "json"]) == 0

    def no_constant(x):
        raise AssertionError(f"{x} is not JSON")

    record = json.loads(capsys.readouterr().out, parse_constant=no_constant)
    early = record["emergence"]["early"]
    assert (early["k"], early["n"], early["low"], early["n_units"]) == (2, 2, None, 1)
    assert early["interval"].startswith("none") and "layers" in early["method"]
    assert record["transitions"]["n_confident"] == 4 and record["transitions"]["method"] == "bh"
    # no placeholder strings: a censored value says so in a boolean, a count has no resampling units
    text = json.dumps(record)
    assert '"not_reached": "value"' not in text and '"not_reached": "high"' not in text
    assert record["emergence"]["settled_median_all"].get("value_not_reached") in (None, True)
    assert "n_units" not in record["transitions"]["undetermined"]  # a count: before, "n_units": 0
    assert main(["findings", "--store", str(root), "--scores", "ahon_lnn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ahon_ln" in err[0]


def test_emergence_without_a_dormant_head_at_the_end(tmp_path):
    d = np.zeros((2, 1, 2), dtype=bool)
    d[0, 0, 0] = True
    f = series_findings(write_series(tmp_path / "s", {"ahon_ln": d}, [0, 10]), MODEL)
    assert f.emergence.early.n == 0 and math.isnan(f.emergence.early.value) and f.emergence.n_censored == 2
    assert "no head has settled dormant" in "\n".join(findings_lines(f))


def test_emergence_figure_says_what_is_true_when_no_head_settled(tmp_path):
    """Issue 62 item 4: with heads dormant at the last checkpoint but none settled (a short run), the panel said
    "no head is dormant at the last checkpoint" and its x axis collapsed around the EARLY line; it now counts the
    dormant heads there and keeps the series' tokens (0 to the last checkpoint's) on its axis."""
    from dormant_tasks.reporting import figures as fg

    tokens = [0, 2_000, 4_000, 6_400]
    d = np.zeros((4, 4, 8), dtype=bool)  # [checkpoint, layer, head]: 32 heads
    d[3, 0, :2] = True  # two heads dormant at the last checkpoint only: a run too short to have settled
    e = series_findings(write_series(tmp_path / "s", {"ahon_ln": d}, tokens), MODEL).emergence
    assert e.settled_tokens.size == 0 and e.n_heads == 32
    ax = fg.draw_emergence(e).axes[0]
    assert [t.get_text() for t in ax.texts] == ["no head settled dormant; 2 of 32 dormant at the last checkpoint"]
    low, high = ax.get_xlim()
    assert low <= 0 and high >= tokens[-1], (low, high)


@pytest.mark.parametrize("settled", [[400_000, 900_000], [10, 20]])  # none early (k = 0), all early (k = n)
@pytest.mark.parametrize("rounded", [False, True])  # the interval's end exact, or past the value by rounding
def test_emergence_figure_at_the_ends_of_the_interval(settled, rounded):
    """The early share's point sits at k/n and its bar spans the Wilson interval; at k = 0 or k = n the end that
    meets the value is drawn at it, also where rounding put it a hair past the value (a bar never points back)."""
    from matplotlib.container import ErrorbarContainer

    from dormant_tasks.findings.dynamics import EARLY, STABLE, Emergence, Estimate, Share
    from dormant_tasks.reporting import figures as fg

    early = EARLY * 1_000_000
    k = sum(t <= early for t in settled)
    share = Share.of(k, 2)
    assert (share.low, share.high) == ((0.0, share.high) if k == 0 else (share.low, 1.0))
    if rounded:  # an end a hair past the value, as the interval's formula alone gives it (e.g. 5.6e-17 at k = 0)
        low, high = (np.nextafter(0.0, 1.0), share.high) if k == 0 else (share.low, np.nextafter(1.0, 0.0))
        share = Share(k, 2, float(low), float(high))
    median = Estimate(float(np.median(settled)), min(settled), max(settled), "bootstrap over heads", "tokens")
    e = Emergence(
        4,
        "last",
        1_000_000,
        0.0,
        50.0,
        "r",
        10,
        ["L0.H0", "L0.H1"],
        np.array(settled),
        np.array(settled),
        ["a", "b"],
        2,
        STABLE,
        3,
        median,
        median,
        median,
        median,
        median,
        early,
        share,
    )
    fig = fg.draw_emergence(e)
    (bar,) = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    point, _caps, (stem,) = bar.lines
    assert point.get_xdata().tolist() == [early] and point.get_ydata().tolist() == [100 * k / 2]
    ((_, bottom), (_, top)) = stem.get_segments()[0]
    value = 100 * k / 2
    assert bottom <= value <= top  # both arms of the bar point away from the value
    if k == 0:
        assert (bottom, top) == (0.0, pytest.approx(100 * share.high))
    else:
        assert (bottom, top) == (pytest.approx(100 * share.low), 100.0)


def test_status_says_not_derived_yet_where_an_interrupted_run_left_no_transitions(tmp_path):
    root = write_series(tmp_path / "s", {"ahon_ln": picture()}, TOKENS, transitions=False)
    line = series_line(root, MODEL)
    assert "transitions not derived yet" in line and "0 total" not in line
    derived = series_line(hand_store(tmp_path / "h", second_set=False), MODEL)
    assert "not derived yet" not in derived and "ahon_ln transitions 6 (" in derived


def test_findings_one_or_two_checkpoints_cannot_support_are_not_stated(tmp_path):
    """`--max 1` gave "first dormant head at ..." and a rate from one checkpoint. Dynamics need two checkpoints,
    a rate per token three: the paragraphs say so instead, with the command that adds checkpoints."""
    from dormant_tasks.findings import series_findings
    from tests.builders.stores import TOKENS as TOKENS_6
    from tests.builders.stores import known_picture

    texts = {}
    for n in (1, 2, 6):
        store = write_series(tmp_path / f"store-{n}", {"ahon_ln": known_picture()[:n]}, TOKENS_6[:n])
        texts[n] = "\n".join(findings_lines(series_findings(store, MODEL, "ahon_ln"), esc=str))
    one, two, six = texts[1], texts[2], texts[6]
    assert ", 1 checkpoint to " in one and "first dormant head" not in one and "confident per billion" not in one
    assert one.count("needs at least 2 checkpoints and the series has 1") == 2, one
    assert "Rates: not measured: a rate of transitions per token needs at least 3 checkpoints" in two, two
    assert "first dormant head" in two and "confident per billion" not in two
    assert "no rate per billion tokens: the stage spans 4M tokens, under the 1B" in six, six
    assert "confident per billion" not in six  # withheld, not extrapolated (issue 62)
    assert "needs at least" not in six


def test_findings_say_a_repeated_caveat_once_and_explain_the_state_level(tmp_path):
    """Before: "no interval: 4 layers, fewer than 5" a dozen times in one paragraph; the p <= level unexplained."""
    from dormant_tasks.findings import series_findings

    lines = findings_lines(series_findings(hand_store(tmp_path), MODEL, "ahon_ln"), esc=str)
    for paragraph in lines:
        assert paragraph.count("fewer than 5") <= 1, paragraph
    text = "\n".join(lines)
    assert (
        "p over the head's checkpoints (null: its dormant rate never crosses 0.5; whole clusters of inputs resampled) is <="
        in text
    )


def test_paired_changes_pooled_over_every_function_and_set_of_the_series(tmp_path, capsys):
    """`paired_family="series"` (`dormant findings --paired-fdr series`): the paired changes' q-values are BH over
    every (pair, head) of every function and calibration set at once, by hand here from each set's paired p."""
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.statistics import bh_qvalues, decision_clusters, paired_changes
    from dormant_tasks.tracking import open_views
    from tests.builders.stores import store_of_two_sets

    root = store_of_two_sets(tmp_path, differ=True)
    ps = []
    for view in open_views(root, MODEL):
        (s,) = view.states(["ahon_ln"])
        ps.append(paired_changes(s.inactive, decision_clusters(s.inactive, s.clusters).labels, s.predecessor).p)
    by_pair = series_findings(root, MODEL).transitions.paired
    pooled = series_findings(root, MODEL, paired_family="series").transitions.paired
    np.testing.assert_array_equal(pooled.p, by_pair.p)
    np.testing.assert_array_equal(pooled.p, ps[0])
    flat = bh_qvalues(np.concatenate([p.ravel() for p in ps]))
    np.testing.assert_allclose(pooled.q, flat[: ps[0].size].reshape(ps[0].shape), rtol=1e-12)
    assert not np.array_equal(pooled.q, by_pair.q)  # a larger family: other q-values
    assert pooled.family == "series (2 functions x sets)"
    assert main(["findings", "--store", str(root), "--model", MODEL, "--paired-fdr", "series", "--format", "json"]) == 0
    assert "every function and calibration set of the series" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="--paired-fdr"):
        series_findings(root, MODEL, paired_family="heads")


def test_paired_fdr_reaches_the_report_and_a_track_run(tmp_path, capsys):
    """`--paired-fdr`, declared once (`statistics.paired_fdr_option`), is taken by `dormant report` and `track` too:
    the report's findings hold the paired changes' FDR over the family asked for, and a track request carries it to
    the report it renders (unset, it is not saved: the request ids of earlier runs stay)."""
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.reporting import ReportSettings, render_report
    from dormant_tasks.run import _render_report
    from flows.cli import build_parser
    from flows.cli.track import request_from_args
    from tests.builders.stores import store_of_two_sets

    root = store_of_two_sets(tmp_path, differ=True)
    pooled = render_report(root, MODEL, tmp_path / "series", ReportSettings(paired_fdr="series"))
    by_pair = render_report(root, MODEL, tmp_path / "pair")
    assert "every function and calibration set of the series" in pooled.index_html.read_text()
    assert "every function and calibration set of the series" not in by_pair.index_html.read_text()
    assert "the heads of each adjacent pair" in by_pair.index_html.read_text()
    out = tmp_path / "cli"
    argv = ["report", "--store", str(root), "--model", MODEL, "--reports-dir", str(out), "--paired-fdr", "function"]
    assert main(argv) == 0
    assert "every pair and head" in (out / "index.html").read_text(), capsys.readouterr().out

    def track(*argv):
        return request_from_args(build_parser().parse_args(["track", "--model", MODEL, "--store", str(root), *argv]))

    request = track("--paired-fdr", "series", "--reports-dir", str(tmp_path / "tracked"))
    assert request.paired_fdr == "series" and track().paired_fdr is None
    assert '"paired_fdr":' not in track().to_json() and track().request_id != request.request_id
    assert "every function and calibration set of the series" in _render_report(request).index_html.read_text()
    with pytest.raises(ConfigError, match="--paired-fdr 'heads': choose one of pair, function, series"):
        track().__class__(**{**track().__dict__, "paired_fdr": "heads"})
