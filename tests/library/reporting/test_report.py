"""The evolution report, from hand-built stores whose pictures are known (tests/builders/stores.py).

The stores are real Parquet stores written through `dormant_tasks.store.io`; their transitions are derived
by the real `dormant_tasks.tracking.transitions.derive_transitions`. Only the head scores are made up (chosen on
the right side of tau for the states each test wants), since no model is needed to draw a report.
"""

from __future__ import annotations

import itertools
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from dormant_tasks.errors import ConfigError, ReportError, StoreError
from dormant_tasks.findings.dynamics import series_findings
from dormant_tasks.outputs import OUTPUT_MARKER
from dormant_tasks.reporting import set_figures as sf
from dormant_tasks.reporting.figure_data import (
    agreement_iou,
    dormant_percent,
    evaluation_groups,
    layer_counts,
    raster_data,
    score_bands,
    series_tau_positions,
    summary_rows,
    transition_counts,
)
from dormant_tasks.reporting.report import ReportSettings, render_report
from dormant_tasks.reporting.series_data import load_series
from dormant_tasks.reporting.sets import LengthDependence
from dormant_tasks.reporting.texts import report_markdown
from dormant_tasks.store.io import store_folder, write_table
from dormant_tasks.tracking.transitions import derive_transitions
from flows.cli import main
from tests.builders.stores import CAL, MODEL, TAUS, TOKENS, known_picture, write_series


@pytest.fixture
def known_store(tmp_path):
    # Files written out of series order: the report must order checkpoints by (stage, step).
    return write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS, order=[4, 0, 5, 2, 1, 3])


def test_raster_and_transition_counts_show_the_known_picture(known_store):
    series = load_series(known_store, MODEL)
    r = raster_data(series, "ahon_ln")
    assert r.row_labels == ["L0.H0", "L0.H1", "L0.H2", "L1.H0", "L1.H1", "L1.H2"]
    assert r.columns == [f"stage1-step{c * 10}-tokens{TOKENS[c]}" for c in range(6)]
    np.testing.assert_array_equal(r.states[5], [0, 0, 0, 1, 1, 0])  # row of L1.H2
    np.testing.assert_array_equal(r.states[0], [0, 1, 1, 1, 1, 1])  # row of L0.H0
    assert not r.states[[1, 2, 3, 4]].any()
    marks = {(int(h), int(c)): int(r.marks[h, c]) for h, c in np.argwhere(r.marks)}
    assert marks == {(0, 1): 1, (5, 3): 1, (5, 5): -1}

    counts = transition_counts(series, "ahon_ln")
    assert counts.to_revisions == r.columns[1:]
    np.testing.assert_array_equal(counts.fell, [1, 0, 1, 0, 0])
    np.testing.assert_array_equal(counts.woke, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(layer_counts(series, "ahon_ln"), [[0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0]])
    np.testing.assert_allclose(dormant_percent(series)[0], 100 * np.array([0, 1, 1, 2, 2, 1]) / 6)


def test_summary_rows_and_markdown(known_store):
    series = load_series(known_store, MODEL)
    (row,) = summary_rows(series)
    assert row["score_fn"] == "ahon_ln" and row["tau"] == 0.5 and row["direction"] == "<"
    assert row["first_dormant_revision"] == "stage1-step10-tokens1000" and row["first_dormant_tokens"] == 1000
    assert row["final_pct_dormant"] == round(100 / 6, 2)
    assert (row["fell_dormant"], row["woke"], row["heads_ever_changed"]) == (2, 1, 2)
    assert (row["confident"], row["blips"]) == (0, 0)  # no interval stored (null: unknown), no blip
    md = report_markdown(series)
    assert md.startswith(f"# Dormant heads: {MODEL}")
    assert "| ahon_ln | < 0.5 | stage1-step10-tokens1000 (1K tokens) | 16.67 | 2 | 1 | 0 | 0 | 2 |" in md


def test_score_bands_and_agreement_match_brute_force(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.random((3, 2, 4)) < 0.4
    b = a.copy()
    b[2] = rng.random((2, 4)) < 0.5
    never = np.zeros_like(a)
    scores = {fn: rng.random((3, 2, 4)) for fn in ("ahon_ln", "lthon_ln", "avvn_ln")}
    root = write_series(tmp_path / "s", {"ahon_ln": a, "lthon_ln": b, "avvn_ln": never}, [0, 10, 20], scores=scores)
    series = load_series(root, MODEL)
    assert series.score_fns == ("avvn_ln", "lthon_ln", "ahon_ln")  # the paper's order, not file order
    bands = score_bands(series, "lthon_ln")
    for c in range(3):
        values = sorted(scores["lthon_ln"][c].ravel())
        np.testing.assert_allclose(bands[:, c], np.percentile(values, [10, 50, 90]))
    iou = agreement_iou(series)
    sets = {
        fn: {h for h in range(8) if m[-1].ravel()[h]} for fn, m in (("avvn_ln", never), ("lthon_ln", b), ("ahon_ln", a))
    }
    for (i, f), (j, g) in itertools.product(enumerate(series.score_fns), repeat=2):
        union = sets[f] | sets[g]
        if union:
            assert iou[i, j] == pytest.approx(len(sets[f] & sets[g]) / len(union))
        else:
            assert np.isnan(iou[i, j])


def test_render_report_writes_an_offline_report(known_store, tmp_path):
    out = tmp_path / "reports" / "tiny"
    result = render_report(known_store, MODEL, out_dir=out)
    assert result.out_dir == out and result.index_html == out / "index.html" and result.summary_md.is_file()
    assert set(result.figures) == {
        "dormant_percent",
        "raster_ahon_ln",
        "layers_ahon_ln",
        "transitions_ahon_ln",
        "rates_ahon_ln",
        "scores_ahon_ln",
        "findings_emergence",  # the findings' figures (docs/SCORES.md §7); set_agreement needs two sets, and
        # agreement between functions two functions (one here: no figure of a measurement not made)
        "findings_transitions",
    }
    for png, svg in result.figures.values():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in svg.read_bytes()[:2000]
    html = result.index_html.read_text()
    for png, svg in result.figures.values():
        assert f'src="figures/{png.name}"' in html and f'href="figures/{svg.name}"' in html
    assert "http://" not in html and "https://" not in html  # opens offline: no CDN
    assert CAL in html and TAUS in html and "fixed" in html and "0.1.0" in html
    series = load_series(known_store, MODEL)
    found, positions = series_findings(known_store, MODEL), series_tau_positions(known_store, series)
    assert result.summary_md.read_text() == result.markdown == report_markdown(series, None, found, positions)
    assert result.summary_rows == summary_rows(load_series(known_store, MODEL))
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny"]  # no temp folder left behind


def test_rerender_replaces_the_old_report(known_store, tmp_path):
    out = tmp_path / "r"
    render_report(known_store, MODEL, out_dir=out)
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    (out / "figures" / "raster_old.png").write_bytes(b"a figure of an older report")
    marker["files"].append("figures/raster_old.png")  # as an older report listed its own figure
    (out / OUTPUT_MARKER).write_text(json.dumps(marker))
    render_report(known_store, MODEL, out_dir=out)
    assert not (out / "figures" / "raster_old.png").exists() and (out / "index.html").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name != "store"] == ["r"]


def test_reuse_returns_a_report_of_the_same_inputs_and_renders_after_a_change(known_store, tmp_path):
    """What `dormant track` asks on a rerun: an unchanged store keeps its report; any stored change renders anew."""
    out = tmp_path / "r"
    first = render_report(known_store, MODEL, out_dir=out, reuse=True)
    stamp = (out / "index.html").stat().st_mtime_ns
    again = render_report(known_store, MODEL, out_dir=out, reuse=True)
    assert (out / "index.html").stat().st_mtime_ns == stamp  # not rendered again
    assert again.summary_rows == json.loads(json.dumps(first.summary_rows, default=str))
    assert again.markdown == first.markdown and set(again.figures) == set(first.figures)
    write_table(known_store, "evaluations", [], file_key="later-run", model_id=MODEL)  # the store changed
    render_report(known_store, MODEL, out_dir=out, reuse=True)
    assert (out / "index.html").stat().st_mtime_ns != stamp
    render_report(known_store, MODEL, out_dir=out)  # `dormant report` always renders
    assert (out / "index.html").is_file()


def test_single_checkpoint_report_has_no_transitions_section(tmp_path):
    root = write_series(tmp_path / "s", {"ahon_ln": known_picture()[3:4]}, [5_000])
    result = render_report(root, None, out_dir=tmp_path / "out")  # the store's only model
    assert "transitions_ahon_ln" not in result.figures and "raster_ahon_ln" in result.figures
    html = result.index_html.read_text()
    assert "<h2>Transitions</h2>" not in html and "no transitions" in html
    assert result.summary_rows[0]["final_pct_dormant"] == round(100 * 2 / 6, 2)


def test_evaluations_give_the_within_one_point_table(known_store, tmp_path):
    rev = "stage1-step50-tokens4000000"
    base = {
        "model_id": MODEL,
        "revision": rev,
        "stage": 1,
        "step": 50,
        "tokens": 4_000_000,
        "task": "winogrande",
        "shots": 5,
        "mode": "dynamic",
        "n_items": 100,
        "base_accuracy": 0.60,
        "code_version": "0.1.0",
        "metric": "acc,none",
        "chat_template": False,
        "bos": "paper",
        "fewshot_split": "validation",
        "data_source": "bundled",
        "evaluated_at": datetime(2026, 12, 3, tzinfo=UTC),
    }
    # ahon_ln crosses 59 between (10, 59.5) and (20, 58.5): at 15. lthon_ln never drops below 59.
    points = {"ahon_ln": [(0.0, 60.0), (10.0, 59.5), (20.0, 58.5)], "lthon_ln": [(0.0, 60.0), (12.0, 59.8)]}
    write_table(
        known_store,
        "evaluations",
        [
            base | {"score_fn": f, "quantile": q / 100, "tau": 0.1, "frac_zeroed": x / 100, "accuracy": y / 100}
            for f, pts in points.items()
            for q, (x, y) in zip((0, 5, 10), pts)
        ],
        file_key="eval-1",
    )
    write_table(
        known_store,
        "evaluations",
        [base | {"mode": "static", "score_fn": "ahon_ln", "tau": 0.5, "frac_zeroed": 0.1667, "accuracy": 0.5725}],
        file_key="eval-2",
    )
    (group,) = evaluation_groups(load_series(known_store, MODEL))
    assert (group.revision, group.task, group.shots) == (rev, "winogrande", 5)
    assert group.base_accuracy == pytest.approx(60.0)  # stored as a fraction, shown in %
    assert group.within_1pt == {"lthon_ln": 0.0, "ahon_ln": pytest.approx(15.0)}
    result = render_report(known_store, MODEL, out_dir=tmp_path / "out")
    assert "accuracy_vs_zeroed_0" in result.figures
    html = result.index_html.read_text()
    assert "5-shot" in html and "<td>15.00</td>" in html
    assert "Protocol: 5-shot, acc,none, no chat template, BOS rule paper, data bundled, shots from validation" in html
    assert "Protocol: 5-shot, acc,none" in result.markdown
    assert "| ahon_ln | 15.00 |" in result.markdown
    assert "Static zeroing" in html and "<td>57.25</td>" in html  # a static row is listed, not drawn as a curve


def _assert_no_report(parent: Path):
    assert not parent.exists() or list(parent.iterdir()) == []


@pytest.mark.parametrize(
    "case",
    ["no_store", "empty_store", "unknown_model", "no_head_scores", "no_transitions", "unknown_fn", "untracked_fn"],
)
def test_bad_input_raises_and_leaves_no_report(case, tmp_path):
    root, model, fn = tmp_path / "store", MODEL, None
    if case == "empty_store":
        store_folder(root, create=True)
    elif case in ("unknown_model", "unknown_fn", "untracked_fn"):
        write_series(root, {"ahon_ln": known_picture()}, TOKENS)
        model = {"unknown_model": "test-org/tiny-serie"}.get(case, MODEL)
        fn = {"unknown_fn": "ahon_lnn", "untracked_fn": "lthon_ln"}.get(case)
    elif case == "no_head_scores":
        write_series(root, {"ahon_ln": known_picture()}, TOKENS)
        for p in (root / "head_scores").rglob("*.parquet"):
            p.unlink()
    elif case == "no_transitions":
        write_series(root, {"ahon_ln": known_picture()}, TOKENS, transitions=False)
    # head_scores files deleted by hand: the manifest names them, so the store refuses with the repair command
    expected = {"no_store": StoreError, "no_head_scores": StoreError, "unknown_fn": ConfigError}.get(case, ReportError)
    with pytest.raises(expected) as err:
        render_report(root, model, tmp_path / "reports" / "x", ReportSettings(score_fn=fn))
    message = str(err.value)
    if case == "unknown_model":
        assert 'did you mean "test-org/tiny-series"' in message
    if case == "no_head_scores":
        assert "dormant store repair --store" in message
    _assert_no_report(tmp_path / "reports")


def test_checkpoints_of_older_taus_are_not_current(tmp_path):
    """After a partial re-tau the series' current taus hold 3 checkpoints; the 3 of older taus are left out."""
    root = write_series(
        tmp_path / "store",
        {"ahon_ln": known_picture()},
        TOKENS,
        taus_ids=[TAUS] * 3 + ["older-taus"] * 3,
        transitions=False,
    )
    from dormant_tasks.tracking.series import SeriesView

    view = SeriesView.open(root, MODEL)
    assert view.n_stale == 3
    write_table(
        root,
        "transitions",
        derive_transitions(view.head_scores(), view.checkpoints_table()),
        file_key="transitions",
        model_id=MODEL,
    )
    series = load_series(root, MODEL)
    assert series.revisions == [f"stage1-step{c * 10}-tokens{TOKENS[c]}" for c in range(3)]
    assert {c["taus_id"] for c in series.checkpoints} == {TAUS}


def test_cli_report(known_store, tmp_path, capsys):
    out = tmp_path / "cli-out"
    assert main(["report", "--store", str(known_store), "--reports-dir", str(out)]) == 0
    assert (out / "index.html").is_file() and (out / "figures" / "raster_ahon_ln.svg").is_file()
    assert "index.html" in capsys.readouterr().out
    write_series(known_store, {"ahon_ln": known_picture()}, TOKENS, model_id="other-series")
    assert main(["report", "--store", str(known_store), "--reports-dir", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dormant report: error:") and MODEL in err and "other-series" in err and "--model" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("umask", "folder_mode", "file_mode"), [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640)])
def test_report_folders_follow_the_umask(known_store, tmp_path, umask, folder_mode, file_mode):
    old = os.umask(umask)
    try:
        result = render_report(known_store, MODEL, out_dir=tmp_path / "published")
    finally:
        os.umask(old)
    assert (result.out_dir.stat().st_mode & 0o777) == folder_mode
    assert ((result.out_dir / "figures").stat().st_mode & 0o777) == folder_mode
    assert (result.index_html.stat().st_mode & 0o777) == file_mode
    png, _ = next(iter(result.figures.values()))
    assert (png.stat().st_mode & 0o777) == file_mode


def test_default_report_folder_is_under_the_working_directory(known_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DORMANT_REPORTS", raising=False)
    result = render_report(known_store, MODEL)
    assert result.out_dir.parent.resolve() == (tmp_path / "reports").resolve() and result.index_html.is_file()
    monkeypatch.setenv("DORMANT_REPORTS", str(tmp_path / "elsewhere"))
    assert render_report(known_store, MODEL).out_dir.parent == tmp_path / "elsewhere"


def test_length_figure_leaves_undefined_slopes_out_instead_of_drawing_0():
    """length_slope NaN (lengths that do not vary, or a --retau re-aggregated from kept input scores) gets no bar:
    a head undefined on every set is left out, and when all are the figure says so."""
    heads = ["L0.H0", "L0.H1", "L1.H2"]
    slope = np.array([[0.25, np.nan, np.nan], [np.nan, np.nan, -0.5]])  # [set, head]: L0.H1 undefined on both
    ld = LengthDependence("ahon_ln", "main", ["cal-a", "cal-b"], heads, slope, np.zeros((2, 3)))
    ax = sf.draw_set_length(ld).axes[0]
    assert sorted(p.get_height() for p in ax.patches) == [-0.5, 0.25]  # no 0-height bar for a NaN
    assert [t.get_text() for t in ax.get_xticklabels()] == ["L0.H0", "L1.H2"]
    assert "1 head(s) undefined on every set left out" in ax.get_title()

    none = LengthDependence("ahon_ln", "main", ["cal-a", "cal-b"], heads, np.full((2, 3), np.nan), np.zeros((2, 3)))
    ax = sf.draw_set_length(none).axes[0]
    assert not ax.patches
    assert any("undefined (NaN) for all 3 heads" in t.get_text() for t in ax.texts)


def test_a_report_opens_its_series_once(known_store, tmp_path, monkeypatch):
    """Each calibration set's view is opened once per report (its taus, manifest and set-aside table read once), and
    every section reads that view: before, one report opened the series four times."""
    from dormant_tasks.tracking import SeriesView

    opened = []
    real = SeriesView.open.__func__

    def counting(cls, store, model_id, calibration_id=None, **kw):
        opened.append((model_id, calibration_id))
        return real(cls, store, model_id, calibration_id, **kw)

    monkeypatch.setattr(SeriesView, "open", classmethod(counting))
    render_report(known_store, MODEL, out_dir=tmp_path / "report")
    assert opened == [(MODEL, CAL)]  # the store's one set, once


def test_a_report_checks_its_store_and_reads_its_taus_once(known_store, tmp_path):
    """The store is checked once (`StoreFolder.open`) and passed down opened; the series' taus are read once and
    kept by its view: before, one report checked the store folder 26 times and read the taus 7 times."""
    import sys

    from dormant_tasks.store import StoreFolder, io, layout

    calls = []

    def hook(frame, event, arg):
        if event != "call":
            return
        if frame.f_code is layout.store_folder.__code__ and not isinstance(frame.f_locals["path"], StoreFolder):
            calls.append("check")
        elif frame.f_code is io.read_table.__code__ and frame.f_locals["table"] == "taus":
            calls.append("taus")

    sys.setprofile(hook)
    try:
        render_report(known_store, MODEL, out_dir=tmp_path / "report")
    finally:
        sys.setprofile(None)
    assert sorted(calls) == ["check", "taus"]
