"""`dormant compare`: series of different shapes, families and cadences, tracked into one store by the library.

Three real series of random-init tiny checkpoints (real files, arbitrary weights: shapes and cadences are what is
compared here, so untrained weights will do), tracked by the track flow's own steps without Prefect
(`builders.track_steps`):
- tiny-olmo2-4x8: OLMo-2, 4 layers x 8 heads, 4 checkpoints every 20K tokens, calibration set winogrande;
- tiny-llama-6x4: Llama with grouped-query attention (2 key/value heads), 6 layers x 4 heads, 3 checkpoints every
  100K tokens, on two calibration sets (winogrande and wikipedia);
- pythia-14m: GPT-NeoX named as a Pythia series (`step{N}` folders, 2,097,152 tokens per step), 3 x 4 heads, log-
  spaced steps 0, 1, 8, 64, on winogrande.
Each is tracked under ahon_ln with one fixed tau (0.9, so that random heads fall on both sides) and ahon with its
default quantile tau (a per-series threshold in raw units, which the comparison must say).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np
import pytest
from markupsafe import escape

from dormant_tasks.errors import ReportError
from dormant_tasks.findings.dynamics import series_findings
from dormant_tasks.reporting import comparisons
from dormant_tasks.reporting.compare import (
    FRACTIONS,
    compared_set,
    depth_profiles,
    differences,
    load_comparison,
    nearest_checkpoint,
    newcombe_interval,
    percent_curves,
)
from dormant_tasks.reporting.compare_page import render_comparison
from dormant_tasks.reporting.compare_tables import (
    FINDINGS_COLUMNS,
    cell_fields,
    cell_text,
    comparison_table,
    findings_rows,
)
from dormant_tasks.reporting.figure_data import dormant_percent
from dormant_tasks.reporting.report import render_report
from dormant_tasks.reporting.series_data import load_series
from dormant_tasks.tracking.request import TrackRequest
from flows.cli import main
from tests.builders.series import save_model_series, save_random_series
from tests.builders.stores import CAL, write_series
from tests.builders.track import track_steps

OLMO, LLAMA, PYTHIA = "tiny-olmo2-4x8", "tiny-llama-6x4", "pythia-14m"
PYTHIA_STEPS = (0, 1, 8, 64)
TOKENS_PER_STEP = 2_097_152
FNS = ("ahon_ln", "ahon")


def _llama(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


def _pythia(tokenizer):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = GPTNeoXConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=512,
        use_parallel_residual=True,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPTNeoXForCausalLM(config)


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_tokenizer):
    root = tmp_path_factory.mktemp("compare")
    olmo = save_random_series(
        root / OLMO,
        tiny_tokenizer,
        [f"stage1-step{s}-tokens{2 * s}K" for s in (0, 10, 20, 40)],
        n_layers=4,
        n_heads=8,
    )
    llama = save_model_series(
        root / LLAMA,
        tiny_tokenizer,
        [f"stage1-step{s}-tokens{2 * s}K" for s in (0, 50, 100)],
        lambda: _llama(tiny_tokenizer),
    )
    pythia = save_model_series(
        root / PYTHIA, tiny_tokenizer, [f"step{s}" for s in PYTHIA_STEPS], lambda: _pythia(tiny_tokenizer)
    )
    common = dict(store=str(root / "store"), limit=8, score_fns=FNS, taus=("ahon_ln=0.9",), report=False, device="cpu")
    for source, extra in (
        (olmo, {}),
        (llama, {"calibrations": ("winogrande", "wikipedia")}),
        (pythia, {"tokens_per_step": TOKENS_PER_STEP}),
    ):
        result = track_steps(TrackRequest(source=str(source), **common, **extra))
        assert not result.failed, result.failed
    return root / "store"


@pytest.fixture(scope="module")
def rendered(store, tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    for m in (OLMO, LLAMA, PYTHIA):
        render_report(store, m, out_dir=reports / m)
    return render_comparison(store, [OLMO, LLAMA, PYTHIA], out_dir=reports / "compare-3", score_fns=list(FNS))


def test_the_page_renders_every_figure_of_every_function(rendered):
    assert set(rendered.figures) == {f"{kind}_{fn}" for kind in ("tokens", "fraction", "depth") for fn in FNS}
    html = rendered.index_html.read_text(encoding="utf-8")
    for png, svg in rendered.figures.values():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in svg.read_bytes()[:2000]
        assert f'src="figures/{png.name}"' in html and f'href="figures/{svg.name}"' in html
    assert "http://" not in html and "https://" not in html  # opens offline
    for m in (OLMO, LLAMA, PYTHIA):  # each series links to its own report beside the page
        assert f'<a href="../{m}/index.html">{m}</a>' in html
    assert rendered.summary_md.is_file() and "## Differences under ahon_ln" in rendered.summary_md.read_text()
    beside = {p.name for p in rendered.out_dir.parent.iterdir()}
    assert beside == {OLMO, LLAMA, PYTHIA, "compare-3"}  # no temp file, no index nor lock beside the folder named


def test_the_findings_table_is_each_series_own_findings(store, rendered):
    c = rendered.comparison
    assert [m.model_id for m in c.members] == [OLMO, LLAMA, PYTHIA]
    assert [(m.series.n_layers, m.series.n_heads) for m in c.members] == [(4, 8), (6, 4), (3, 4)]
    for fn in FNS:
        for model, values in findings_rows(c, fn):
            own = series_findings(store, model, fn)  # what `dormant findings --model M --scores FN` states
            theirs = [get(own) for _, get in FINDINGS_COLUMNS]
            assert [cell_fields(v) for v in values] == [cell_fields(v) for v in theirs]  # NaN: both ""
            assert [cell_text(v) for v in values] == [cell_text(v) for v in theirs]
    html = rendered.index_html.read_text(encoding="utf-8")
    own = series_findings(store, PYTHIA, "ahon_ln")
    assert str(escape(cell_text(own.transitions.more_than_once))) in html
    # the numbers the series' own CLI prints are the table's
    text = comparison_table(c, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 3 * len(FNS)
    for row in rows:
        f = series_findings(store, row["series"], row["score_fn"])
        assert (
            int(row["confident transitions"]) == f.transitions.n_confident
            and int(row["checkpoints"]) == f.n_checkpoints
        )
        share = f.transitions.more_than_once
        assert float(row["heads whose mask changed more than once"]) == pytest.approx(share.value, rel=1e-5)
        low = row["heads whose mask changed more than once low"]  # empty: too few layers for an interval
        assert (float(low) if low else math.nan) == pytest.approx(share.low, rel=1e-5, nan_ok=True)


def test_the_curves_are_the_measured_checkpoints_on_path_tokens(store, rendered):
    c = rendered.comparison
    curves = {k.model_id: k for k in percent_curves(c, "ahon_ln")}
    pythia = curves[PYTHIA]
    assert pythia.tokens.tolist() == [s * TOKENS_PER_STEP for s in PYTHIA_STEPS]  # every checkpoint, no resampling
    np.testing.assert_allclose(pythia.fraction, np.array(PYTHIA_STEPS) / PYTHIA_STEPS[-1])
    assert curves[OLMO].tokens.tolist() == [0, 20_000, 40_000, 80_000]
    for m in c.members:
        s = load_series(store, m.model_id)
        np.testing.assert_array_equal(curves[m.model_id].pct, dormant_percent(s)[s.fn_index("ahon_ln")])
    # the depth profile at 25% of training takes each series' nearest measured checkpoint
    profiles = {p.model_id: p for p in depth_profiles(c, "ahon_ln", 0.25)}
    assert profiles[OLMO].revision == "stage1-step10-tokens20K" and profiles[OLMO].fraction == 0.25
    assert profiles[PYTHIA].revision == "step8"  # 8/64 = 12.5% is nearer 25% than 100%
    assert profiles[LLAMA].depth.tolist() == [(k + 0.5) / 6 for k in range(6)]
    llama = load_series(store, LLAMA)
    heads = llama.dormant[llama.fn_index("ahon_ln")].reshape(6, 4, -1)  # [layer, head, checkpoint]
    k = nearest_checkpoint(c.members[1].fraction, 0.25)
    np.testing.assert_allclose(profiles[LLAMA].pct, 100 * (heads[:, :, k] == 1).sum(axis=1) / 4)
    assert nearest_checkpoint(np.array([0.0, 0.5, 1.0]), 0.25) == 0  # a tie: the earlier checkpoint
    assert FRACTIONS[-1] == 1.0


def test_the_lines_say_what_limits_the_comparison(rendered):
    notes = rendered.comparison.notes
    html = rendered.index_html.read_text(encoding="utf-8")
    (cal,) = [n for n in notes if n.startswith("Calibration sets differ")]
    assert LLAMA in cal and "wikipedia" in cal and rendered.comparison.calibration_id.startswith("winogrande")
    (raw,) = [n for n in notes if n.startswith("ahon:")]
    assert "per-series quantile" in raw and "raw units" in raw
    assert not [n for n in notes if n.startswith("ahon_ln:")]  # one fixed tau: no line
    assert any(n.startswith("Different architectures") for n in notes)
    assert any(n.startswith("Different cadences") for n in notes)
    for n in notes:
        assert str(escape(n)) in html
    diffs = differences(rendered.comparison, "ahon")
    assert all(d.estimate is None and d.test.startswith("no test") for d in diffs)  # quantile tau: no test
    diffs = differences(rendered.comparison, "ahon_ln")
    assert {d.finding for d in diffs if d.estimate is None} >= {"transitions"}
    inputs = [d for d in diffs if d.finding.startswith("input dependence")]
    assert all(d.estimate is None for d in inputs)  # only the llama series has two sets


def test_newcombe_interval_matches_the_published_example():
    # Newcombe (1998), Statistics in Medicine 17:873, Table II example (a): 56/70 - 48/80 = 0.2000,
    # method 10 interval 0.0524 to 0.3339
    d, low, high = newcombe_interval(56, 70, 48, 80)
    assert (
        d == pytest.approx(0.2) and low == pytest.approx(0.0524, abs=5e-5) and high == pytest.approx(0.3339, abs=5e-5)
    )
    # (h) 0/10 - 0/20: 0 with -0.1611 to 0.2775
    d, low, high = newcombe_interval(0, 10, 0, 20)
    assert d == 0 and low == pytest.approx(-0.1611, abs=5e-5) and high == pytest.approx(0.2775, abs=5e-5)


def test_the_series_reports_link_to_the_comparison(store, rendered):
    index = json.loads(rendered.index.read_text())
    assert rendered.index == store / "comparisons.json"  # in the store, keyed by the folder's resolved path
    assert index == [{"folder": str(rendered.out_dir.resolve()), "models": [OLMO, LLAMA, PYTHIA]}]
    linked = comparisons.comparisons_of(store, OLMO, rendered.out_dir.parent / OLMO)
    assert linked == [{"title": f"{OLMO} vs {LLAMA} vs {PYTHIA}", "href": "../compare-3/index.html"}]
    report = render_report(store, OLMO, out_dir=rendered.out_dir.parent / OLMO, reuse=True)  # the links changed
    html = report.index_html.read_text(encoding="utf-8")
    assert '<a href="../compare-3/index.html">' in html
    assert comparisons.comparisons_of(store, "someone-else", rendered.out_dir.parent / "someone-else") == []


def test_series_that_share_no_calibration_set_are_refused_with_the_fix(tmp_path):
    d = np.zeros((2, 1, 2), dtype=bool)
    d[1, 0, 0] = True
    root = write_series(tmp_path / "s", {"ahon_ln": d}, [0, 10], model_id="org/a")
    write_series(root, {"ahon_ln": d}, [0, 10], model_id="org/b", calibration_id="other-set-8-abc")
    with pytest.raises(ReportError, match=r"share no calibration set .*org/b: other-set-8-abc.*--calibration"):
        load_comparison(root, ["org/a", "org/b"])
    # sets that differ but share one: compared on it, with the line
    write_series(root, {"ahon_ln": d}, [0, 10], model_id="org/a", calibration_id="set-x-8-def")
    write_series(root, {"ahon_ln": d}, [0, 10], model_id="org/c")
    c = load_comparison(root, ["org/a", "org/c"])
    assert c.calibration_id == CAL
    (line,) = [n for n in c.notes if n.startswith("Calibration sets differ")]
    assert f"org/a: {CAL}, set-x-8-def; org/c: {CAL}" in line and "primary set" not in line
    # different primary sets with one in common: the figures on the shared one, the findings on each primary set
    write_series(root, {"ahon_ln": d}, [0, 10], model_id="org/e", calibration_id="other-set-8-abc")
    write_series(root, {"ahon_ln": d}, [0, 10], model_id="org/e", calibration_id="set-x-8-def")
    c = load_comparison(root, ["org/a", "org/e"])
    assert c.calibration_id == "set-x-8-def" and all(
        m.series.checkpoints[0]["calibration_id"] == "set-x-8-def" for m in c.members
    )
    assert [m.findings["ahon_ln"].calibration_id for m in c.members] == [CAL, "other-set-8-abc"]
    (line,) = [n for n in c.notes if n.startswith("Calibration sets differ")]
    assert "the findings of org/a, org/e are each on its primary set" in line
    assert compared_set({"a": [CAL, "x"], "b": ["y", CAL]}) == CAL
    assert compared_set({"a": ["x", CAL, "y"], "b": ["y", CAL]}) == CAL  # the first shared, in the first's order


def test_cli_compare_prints_the_table_and_a_missing_series_is_one_line(store, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--store", str(store), "--model", OLMO, "--model", PYTHIA, "--reports-dir", str(out)]
    assert main([*argv, "--format", "csv"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [r["series"] for r in rows] == [OLMO, PYTHIA] and (out / "index.html").is_file()
    assert f"compare: {out / 'index.html'}" in captured.err and "note: Different architectures" in captured.err
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("| score function | series | layers × heads |")

    assert main(["compare", "--store", str(store), "--model", OLMO, "--model", "pythia-41m"]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert "'pythia-41m' is not in the store" in line and 'did you mean "pythia-14m"' in line and LLAMA in line
    assert main(["compare", "--store", str(store), "--model", OLMO]) == 2
    assert "two series or more" in capsys.readouterr().err
    assert main(["compare", "--store", str(store), "--model", OLMO, PYTHIA, "--scores", "lthon_ln"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "lthon_ln" in line and "not tracked" in line
    assert not re.search(r"compare-tiny", " ".join(p.name for p in tmp_path.iterdir()))


def test_one_renderer_for_every_findings_value():
    """A field with an interval renders as such whatever its class (a new field of the findings is one line)."""
    from types import SimpleNamespace

    from dormant_tasks.findings.dynamics import Share
    from dormant_tasks.reporting.compare import Estimate

    share = Share.of(3, 12)
    assert cell_text(share).startswith("3 of 12 (25.0%, 95% CI ") and len(cell_fields(share)) == 3
    assert cell_text(Share.of(0, 0)) == "undefined (0 of 0)" and cell_fields(Share.of(0, 0)) == ["", "", ""]
    other = SimpleNamespace(value=0.25, low=0.1, high=0.5)  # e.g. a bootstrap interval added to the findings
    assert cell_text(other) == "0.25 (95% CI 0.1 to 0.5)" and cell_fields(other) == ["0.25", "0.1", "0.5"]
    assert cell_text(Estimate(-22.94, -41.2, -0.93, "test", " points")) == "−22.9 (95% CI −41.2 to −0.9)"
    assert cell_text("never") == "never" and cell_fields(7) == ["7"]


def test_cells_carry_numbers_and_the_header_names_the_unit():
    """Issue 43: "1fraction", "0per billion tokens": a cell carries the number, its column's header the unit."""
    from dormant_tasks.reporting.compare import Estimate
    from dormant_tasks.reporting.compare_tables import DIFFERENCE_HEADER

    assert cell_text(Estimate(1.0, 0.5, 1.0, "bootstrap over layers", "fraction", 8)) == "1 (95% CI 0.5 to 1)"
    rate = Estimate(0.0, 0.0, 1.2, "exact Poisson", "per billion tokens", 9)
    assert cell_text(rate) == "0 (95% CI 0 to 1.2)"
    headers = [h for h, _ in FINDINGS_COLUMNS]
    assert "first dormant, median (fraction of tokens)" in headers
    assert "confident transitions per billion tokens" in headers
    assert any("Jaccard" in h and "noise floor" in h for h in headers)
    assert "percentage points" in DIFFERENCE_HEADER
    for unit in ("fraction", "per billion tokens", "Jaccard", "tokens"):
        for v in (0.0, 1.0, 0.25):
            text = cell_text(Estimate(v, v, v + 1, "bootstrap over layers", unit, 8))
            assert not re.search(r"\d" + re.escape(unit.strip()), text), text


def test_an_interval_of_few_units_is_marked_with_its_n():
    """Issue 43: Wilson's interval of 2 of 3 heads is drawn, but it rests on 3 heads: marked, with n."""
    from dormant_tasks.findings.dynamics import Share
    from dormant_tasks.reporting.compare import Estimate
    from dormant_tasks.reporting.texts import few_units

    assert cell_text(Share.of(2, 3)) == "2 of 3 (66.7%, 95% CI 20.8–93.9%; only 3 heads: few)"
    assert few_units(Share.of(1, 1)) == "; only 1 head: few" and few_units(Share.of(5, 40)) == ""
    assert "few" not in cell_text(Share.of(3, 12))
    layers = Estimate(0.4, float("nan"), float("nan"), "two-stage bootstrap over layers", "fraction", 3)
    assert cell_text(layers) == "0.4 (no interval: 3 layers, fewer than 5)"
    seeds = Estimate(0.4, 0.2, 0.6, "t over seeds", "fraction", 2)
    assert cell_text(seeds).endswith("; only 2 seeds: few)")


def test_each_caption_names_the_axis_as_drawn(rendered):
    """Issue 43: "(log axis)" was printed under linear axes; the caption now names the scale the figure has."""
    from dormant_tasks.reporting import compare_figures as cf
    from dormant_tasks.reporting import figures as fg
    from dormant_tasks.reporting.compare_page import comparison_plots

    assert fg.tokens_scale(np.array([0.25, 0.5, 1.0])) == "linear"
    assert fg.tokens_scale(np.array([1e3, 1e6])) == "log" and fg.tokens_scale(np.array([0, 1e3, 1e6])) == "symlog"
    html = rendered.index_html.read_text(encoding="utf-8")
    words = {v: k for k, v in fg.SCALE_WORDS.items()}
    for p in comparison_plots(rendered.comparison):
        assert str(escape(p.caption)) in html
        if p.kind in ("tokens", "fraction"):
            assert words[p.axis] == p.draw().axes[0].get_xscale()
    # a comparison whose series span less than two decades: a linear axis, said so
    from dormant_tasks.reporting.compare import Curve

    curves = [Curve("a", np.array([10, 20, 40]), np.array([0.25, 0.5, 1.0]), np.array([0.0, 5.0, 10.0]))]
    fig = cf.draw_compare_percent(curves, "ahon_ln", by_fraction=True)
    assert fig.axes[0].get_xscale() == "linear" == fg.tokens_scale(cf.compare_x(curves, True))


def test_no_input_dependence_test_says_which_case_holds():
    """Issue 43: "not measured on the same calibration sets" was printed for series tracked on the same sets
    (one of them with no checkpoint scored on two sets under the function); each case now says what it is."""
    from dormant_tasks.findings.dependence import InputDependence
    from dormant_tasks.reporting.compare import input_dependence_untested

    sets = ["wino-8-aaaaaaaaaaaa", "wiki-8-bbbbbbbbbbbb"]
    measured = InputDependence(sets, ["step10"])
    assert input_dependence_untested("A", measured, "B", InputDependence(sets[::-1], ["step20"]), "ahon_ln") is None
    why = input_dependence_untested("A", measured, "B", InputDependence(sets, []), "ahon_ln")
    assert why == "no test: no checkpoint of B is scored under ahon_ln on two of its calibration sets"
    assert "same calibration sets" not in why
    other = InputDependence([sets[0], "code-8-cccccccccccc"], ["step10"])
    why = input_dependence_untested("A", measured, "B", other, "ahon_ln")
    assert why == (
        "no test: measured on different calibration sets (A alone: wiki-8-bbbbbbbbbbbb; B alone: code-8-cccccccccccc)"
    )
    one = input_dependence_untested("A", InputDependence(sets[:1]), "B", measured, "ahon_ln")
    assert one == "no test: A is tracked on 1 calibration set, input dependence needs 2"
