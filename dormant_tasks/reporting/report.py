"""The evolution report of a series: how dormant heads appear, disappear and move (figures + HTML).

`render_report` writes index.html (opens offline: no CDN, images referenced relatively), every figure as PNG
(slides) and SVG (papers), and summary.md into a temp folder that replaces the destination only when complete,
so a failed render never leaves a partial report. What it shows comes from the modules beside it: the series
(`series_data`), the data of each figure (`figure_data`, `sets`), the texts (`texts`), the drawings
(`figures`, `set_figures`) and the page (`page`). `ReportSettings` says what it shows beyond the series.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.findings import series_findings
from dormant_tasks.outputs import Owner, check_folder, report_folder, staged
from dormant_tasks.reporting import comparisons, page
from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting import set_figures as sf
from dormant_tasks.reporting.figure_data import (
    agreement_iou,
    dormancy_fns,
    dormant_percent,
    dormant_traces,
    evaluation_groups,
    layer_counts,
    raster_data,
    rate_intervals,
    raw_quantile_fns,
    score_bands,
    series_tau_positions,
    summary_rows,
    transition_counts,
)
from dormant_tasks.reporting.findings_report import findings_plots
from dormant_tasks.reporting.series_data import load_series, resolve_model_id
from dormant_tasks.reporting.sets import calibration_sets, length_dependence
from dormant_tasks.reporting.texts import report_markdown
from dormant_tasks.statistics import DEFAULT_RESAMPLING, FDR, FDR_METHOD, PAIRED_FDR_FAMILIES, Resampling
from dormant_tasks.tracking import StoreFolder, Table, open_views, stored_files
from dormant_tasks.version import __version__

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from dormant_tasks.findings import Findings
    from dormant_tasks.reporting.series_data import ReportSeries
    from dormant_tasks.reporting.sets import CalibrationSets


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    index_html: Path
    figures: dict[str, tuple[Path, Path]]  # figure name -> (PNG, SVG)
    summary_md: Path
    summary_rows: list[dict]
    markdown: str  # the text of summary.md


@dataclass(frozen=True)
class ReportSettings:
    """What a report shows of its series beyond the series itself; each is part of its inputs' stamp."""

    score_fn: str | None = None  # the per-function figures' function; None: DEFAULT_FN when tracked, else the first
    hide_blips: bool = False  # the raster with every blip undone (`figure_data.states_without_blips`)
    fdr: float = FDR  # the false discovery rate of the heads called to change confident state
    fdr_method: str = FDR_METHOD  # its correction
    resampling: Resampling = DEFAULT_RESAMPLING  # the findings' intervals
    paired_fdr: str = PAIRED_FDR_FAMILIES[0]  # the family of the paired changes' FDR (`--paired-fdr`)


_Plot = tuple[str, str, Callable[[], "Figure"]]  # (figure kind, file name, draw)


def render_report(
    store,
    model_id: str | None = None,
    out_dir=None,
    settings: ReportSettings | None = None,
    *,
    progress: bool = False,
    reuse: bool = False,
) -> ReportResult:
    """Render the evolution report of `model_id` (the store's only model when None) into `out_dir`, as `settings`
    ask (default: `ReportSettings()`).

    `out_dir` defaults to <$DORMANT_REPORTS or ./reports under the working directory>/<series slug>/.
    The folder is replaced only when the new report is complete, and only when it is new, empty or this store's
    report of this series (`outputs.check_folder`: anything else is a ConfigError before any figure is drawn).
    With `reuse` (what `dormant track` asks), a report rendered from the same store files by the same
    dormant-heads is returned as it is.
    """
    settings = settings or ReportSettings()
    if reuse and (done := _reused(store, model_id, out_dir, settings)) is not None:
        return done
    root = StoreFolder.open(store)  # the one check of the store
    model_id = resolve_model_id(root, model_id)
    # The series is opened once (every calibration set, the primary first) and read by each section from here.
    views = open_views(root, model_id)
    series = load_series(root, model_id, settings.fdr, fdr_method=settings.fdr_method, view=next(iter(views), None))
    fn = settings.score_fn or (DEFAULT_FN if DEFAULT_FN in series.score_fns else series.score_fns[0])
    series.fn_index(fn)
    out = report_folder(series.model_id, out_dir)
    owner = Owner.of("report", store, series.model_id)
    check_folder(out, owner, default=out_dir is None)  # before the figures are drawn
    sets = calibration_sets(views, series, fn)
    # after every set's transitions were read: a pending decision a run stores is in the files the stamp hashes
    stamp = inputs_stamp(root.root, series.model_id, settings, out)
    found = series_findings(
        root,
        series.model_id,
        fn,
        settings.fdr,
        settings.resampling,
        settings.fdr_method,
        views=views,
        paired_family=settings.paired_fdr,
    )
    groups = evaluation_groups(series)
    plots = _series_plots(series, fn, settings.hide_blips)
    if sets is not None and sets.revisions:
        plots += _set_plots(sets, found, length_dependence(views, series, fn), fn, series.n_layers, series.n_heads)
    plots += [p for p in findings_plots(found) if p[1] not in {name for _, name, _ in plots}]
    plots += _evaluation_plots(groups)
    content = page.ReportPage(
        series,
        fn,
        {kind: name for kind, name, _ in plots},
        summary_rows(series),
        groups,
        sets,
        found,
        tuple(series_tau_positions(root, series, views[0])),
        tuple(comparisons.comparisons_of(root, series.model_id, out)),  # `dormant compare` pages of the series
    )
    with staged(out, owner, default=out_dir is None) as tmp:  # published whole, or the old folder kept
        drawn = _draw(plots, tmp / "figures", progress)
        markdown = report_markdown(series, sets, found, list(content.positions))
        (tmp / "summary.md").write_text(markdown, encoding="utf-8")
        (tmp / "index.html").write_text(page.report_html(content), encoding="utf-8")
        rows = summary_rows(series)
        (tmp / STAMP).write_text(json.dumps({"inputs": stamp, "summary_rows": rows}, default=str), encoding="utf-8")
    figures = {n: (out / "figures" / p.name, out / "figures" / s.name) for n, (p, s) in drawn.items()}
    return ReportResult(out, out / "index.html", figures, out / "summary.md", rows, markdown)


def _reused(store, model_id: str | None, out_dir, settings: ReportSettings) -> ReportResult | None:
    """The report in its folder as it is, when it was rendered from the same inputs (`inputs_stamp`)."""
    root = Path(store)  # `resolve_model_id` checks that it is a store
    model_id = resolve_model_id(root, model_id)
    out = report_folder(model_id, out_dir)
    check_folder(out, Owner.of("report", store, model_id), default=out_dir is None)
    return _reusable(out, inputs_stamp(root, model_id, settings, out))


def _series_plots(series: ReportSeries, fn: str, hide_blips: bool) -> list[_Plot]:
    """The series' own figures: % dormant, the raster, layers, transitions, score bands, the functions' agreement."""
    t, tau, L, H = series.tokens, series.taus[fn][0], series.n_layers, series.n_heads
    kept = dormancy_fns(series)  # the role functions are drawn as role shares, not as % dormant
    fns = [series.score_fns[i] for i in kept]
    plots: list[_Plot] = (
        [
            (
                "dormant_percent",
                "dormant_percent",
                lambda: fg.draw_dormant_percent(t, dormant_percent(series)[kept], fns, raw_quantile_fns(series)),
            )
        ]
        if kept
        else []
    )
    plots += [
        (
            "raster",
            f"raster_{fn}",
            lambda: fg.draw_raster(raster_data(series, fn, hide_blips), t, L, H, fn, tau, hide_blips),
        ),
        ("layers", f"layers_{fn}", lambda: fg.draw_layer_counts(layer_counts(series, fn), t, H, fn)),
    ]
    if len(t) > 1:
        plots.append(
            (
                "transitions",
                f"transitions_{fn}",
                lambda: fg.draw_transition_bars(transition_counts(series, fn), t[1:], fn),
            )
        )
        plots.append(("rates", f"rates_{fn}", lambda: fg.draw_rate_intervals(t, rate_intervals(series, fn), fn)))
    plots.append(
        (
            "scores",
            f"scores_{fn}",
            lambda: fg.draw_score_bands(t, score_bands(series, fn), tau, fn, dormant_traces(series, fn)),
        )
    )
    if len(series.score_fns) > 1:  # agreement between functions: none to measure with one
        plots.append(
            (
                "agreement",
                "agreement",
                lambda: fg.draw_agreement(agreement_iou(series), series.score_fns, series.revisions[-1]),
            )
        )
    return plots


def _set_plots(sets: CalibrationSets, found: Findings, lengths, fn: str, n_layers: int, n_heads: int) -> list[_Plot]:
    """The calibration sets' figures: their agreement (with the findings' noise floor), the raster, the lengths."""
    plots: list[_Plot] = [
        (
            "set_agreement",
            "set_agreement",
            lambda: sf.draw_set_agreement(
                sets.tokens, sets.jaccard, fn, sets.union, found.input_dependence.noise_floor
            ),
        ),
        (
            "set_raster",
            "set_raster",
            lambda: sf.draw_set_raster(sets.states, sets.tokens, n_layers, n_heads, fn, len(sets.calibration_ids)),
        ),
    ]
    if lengths is not None:
        plots.append(("set_length", "set_length", lambda: sf.draw_set_length(lengths)))
    return plots


def _evaluation_plots(groups) -> list[_Plot]:
    """One accuracy-against-zeroed figure per group of stored dynamic sweeps."""
    return [
        (
            f"accuracy_vs_zeroed_{k}",
            f"accuracy_vs_zeroed_{k}",
            functools.partial(
                fg.draw_accuracy_vs_zeroed,
                g.curves,
                g.base_accuracy,
                f"{g.task}, {g.shots}-shot, {g.revision} ({g.n_items} items)",
            ),
        )
        for k, g in enumerate(groups)
    ]


def _draw(plots: list[_Plot], folder: Path, progress: bool) -> dict[str, tuple[Path, Path]]:
    """Every figure drawn and saved into `folder` (created): name -> (PNG, SVG)."""
    folder.mkdir()
    return {name: fg.save_figure(draw(), folder, name) for _, name, draw in _progress(plots, progress)}


STAMP = "inputs.json"  # what a report was rendered from (`inputs_stamp`), and its summary rows


def inputs_stamp(root: Path, model_id: str, settings: ReportSettings, out: Path | None = None) -> str:
    """A digest of everything a report reads: the name, size and modification time of each of the series'
    files in the tables it reads, the score function asked for (and the other settings when not the defaults),
    the dormant-heads version and, with `out`, the comparisons beside it that it links to."""
    s = settings
    asked = f"{s.score_fn}\0hide_blips" if s.hide_blips else f"{s.score_fn}"  # the default's stamps stay as they were
    if s.fdr != FDR or s.resampling != DEFAULT_RESAMPLING:
        asked += f"\0fdr={s.fdr}\0{s.resampling}"
    if s.fdr_method != FDR_METHOD:
        asked += f"\0fdr_method={s.fdr_method}"
    if s.paired_fdr != PAIRED_FDR_FAMILIES[0]:
        asked += f"\0paired_fdr={s.paired_fdr}"
    h = hashlib.sha256(f"{__version__}\0{asked}\n".encode())
    if out is not None and (linked := comparisons.comparisons_of(root, model_id, out)):
        h.update(json.dumps(linked).encode())
    for table in (
        Table.checkpoints,
        Table.head_scores,
        Table.transitions,
        Table.head_histories,
        Table.taus,
        Table.evaluations,
        Table.calibration_agreement,
        Table.failed_checkpoints,
        Table.set_aside_checkpoints,
        Table.listed_checkpoints,  # which confident transitions are resolved to adjacent checkpoints
    ):
        for p in stored_files(root, table, model_id):
            st = p.stat()
            h.update(f"{table}/{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _reusable(out: Path, stamp: str) -> ReportResult | None:
    try:
        saved = json.loads((out / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if saved.get("inputs") != stamp or not (out / "index.html").is_file():
        return None
    figures = {p.stem: (p, p.with_suffix(".svg")) for p in sorted((out / "figures").glob("*.png"))}
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    return ReportResult(out, out / "index.html", figures, out / "summary.md", saved["summary_rows"], markdown)


def _progress(items, enabled: bool):
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc="figures", unit="figure", disable=None)  # None: on a terminal only
