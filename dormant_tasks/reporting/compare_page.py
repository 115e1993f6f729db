"""`dormant compare`'s folder: `reports/compare-A-vs-B/` with the figures, `summary.md` and `index.html`
(`templates/compare.html.j2`), published through `dormant_tasks.outputs` and recorded in the store it was made
from (`outputs.record_comparison`), so that the series' reports link to it (`comparisons`)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dormant_tasks.errors import StoreError
from dormant_tasks.names import series_slug
from dormant_tasks.outputs import Owner, check_folder, record_comparison, staged
from dormant_tasks.paths import default_reports_dir
from dormant_tasks.reporting import compare_figures as cf
from dormant_tasks.reporting import figures as fg
from dormant_tasks.reporting import page
from dormant_tasks.reporting.compare import (
    FRACTIONS,
    Comparison,
    depth_profiles,
    differences,
    load_comparison,
    percent_curves,
)
from dormant_tasks.reporting.compare_tables import (
    FINDINGS_COLUMNS,
    SETTINGS_HEADER,
    cell_text,
    comparison_markdown,
    findings_rows,
    settings_rows,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def comparison_folder(model_ids: list[str]) -> str:
    """The default folder name of a comparison: compare-A-vs-B (a long list: the first, a count and a digest)."""
    slugs = [series_slug(m) for m in model_ids]
    name = "compare-" + "-vs-".join(slugs)
    if len(name) <= 120:
        return name
    digest = hashlib.sha256("\0".join(model_ids).encode()).hexdigest()[:8]
    return f"compare-{slugs[0]}-and-{len(slugs) - 1}-more-{digest}"


@dataclass(frozen=True)
class CompareResult:
    comparison: Comparison
    out_dir: Path
    index_html: Path
    figures: dict[str, tuple[Path, Path]]  # figure name -> (PNG, SVG)
    summary_md: Path
    index: Path | None  # the store's index of comparisons, which the series' reports read; None: not recorded


COMPARISON_CAPTIONS = {
    "tokens": "% of heads dormant under {fn} against training tokens ({axis}), one line per series, a point at "
    "every checkpoint measured.",
    "fraction": "% of heads dormant under {fn} against the fraction of each series' own training tokens ({axis}; "
    "1 = its last checkpoint), a point at every checkpoint measured.",
    "depth": "% of each layer's heads dormant under {fn} against relative depth ((layer + ½) / number of layers), at "
    "matched fractions of training: per series its measured checkpoint nearest to each fraction, named in the "
    "legend with its own fraction; each series' markers are shifted sideways a little (the same shift in every "
    "panel) so that equal values of two series stay visible side by side.",
}


@dataclass(frozen=True)
class Plot:
    score_fn: str
    kind: str  # a key of COMPARISON_CAPTIONS
    name: str  # the file name, without suffix
    draw: Callable[[], Figure]
    axis: str = ""  # the x axis as drawn (`figures.SCALE_WORDS`): the caption says what the figure shows

    @property
    def caption(self) -> str:
        return COMPARISON_CAPTIONS[self.kind].format(fn=self.score_fn, axis=self.axis)


def comparison_plots(c: Comparison) -> list[Plot]:
    """Every figure of the comparison, with the scale of its x axis (the one `figures.set_tokens_axis` draws)."""
    plots: list[Plot] = []
    for fn in c.score_fns:
        curves = percent_curves(c, fn)
        panels = [(t, depth_profiles(c, fn, t)) for t in FRACTIONS]
        for kind, by_fraction in (("tokens", False), ("fraction", True)):
            axis = fg.SCALE_WORDS[fg.tokens_scale(cf.compare_x(curves, by_fraction))]
            draw = functools.partial(cf.draw_compare_percent, curves, fn, by_fraction)
            plots.append(Plot(fn, kind, f"{kind}_{fn}", draw, axis))
        plots.append(Plot(fn, "depth", f"depth_{fn}", functools.partial(cf.draw_depth_profiles, panels, fn)))
    return plots


def render_comparison(store, model_ids: list[str], out_dir=None, score_fns: list[str] | None = None) -> CompareResult:
    """Compare the series `model_ids` into `out_dir` (default: <reports dir>/compare-A-vs-B/): index.html, every
    figure as PNG and SVG, summary.md; published only when complete, then recorded in the store
    (`outputs.record_comparison`) so that the series' reports link to it (`index` None when the store takes no
    file: a read-only store is compared all the same)."""
    c = load_comparison(store, model_ids, score_fns)
    ids = [m.model_id for m in c.members]
    out = Path(out_dir) if out_dir is not None else default_reports_dir() / comparison_folder(ids)
    owner = Owner.of("comparison", store, " vs ".join(ids))
    check_folder(out, owner, default=out_dir is None)  # before the figures: nothing the tool did not write is replaced
    plots = comparison_plots(c)
    with staged(out, owner, default=out_dir is None) as tmp:  # published whole, or the old folder kept
        (tmp / "figures").mkdir()
        drawn = {p.name: fg.save_figure(p.draw(), tmp / "figures", p.name) for p in plots}
        markdown = comparison_markdown(c)
        (tmp / "summary.md").write_text(markdown, encoding="utf-8")
        (tmp / "index.html").write_text(page.compare_html(page_context(c, plots, out)), encoding="utf-8")
    try:
        index = record_comparison(store, out, ids)
    except StoreError:
        index = None
    figures = {n: (out / "figures" / p.name, out / "figures" / s.name) for n, (p, s) in drawn.items()}
    return CompareResult(c, out, out / "index.html", figures, out / "summary.md", index)


def page_context(c: Comparison, plots, out: Path) -> dict:
    """The template's context: plain strings and tables (header + rows), escaped by the template."""
    headers = [h for h, _ in FINDINGS_COLUMNS]
    series = []
    for m in c.members:
        report = out.parent / series_slug(m.model_id) / "index.html"  # the series' report, where `report` puts it
        series.append(
            {"model_id": m.model_id, "report": f"../{series_slug(m.model_id)}/index.html" if report.is_file() else None}
        )
    functions = []
    for fn in c.score_fns:
        figures = [{"name": p.name, "caption": p.caption} for p in plots if p.score_fn == fn]
        rows = findings_rows(c, fn)
        functions.append(
            {
                "score_fn": fn,
                "figures": figures,
                "findings": page._table(  # one column per series: a page reads down a finding, across series
                    ["finding", *(m.model_id for m in c.members)],
                    [[h, *(cell_text(values[i]) for _, values in rows)] for i, h in enumerate(headers)],
                ),
                "differences": page._table(
                    ["finding", "series", f"difference from {c.members[0].model_id} (percentage points)", "test"],
                    [[d.finding, d.model_id, cell_text(d.estimate), d.test] for d in differences(c, fn)],
                ),
            }
        )
    return {
        "title": " vs ".join(m.model_id for m in c.members),
        "series": series,
        "calibration_id": c.calibration_id,
        "settings": page._table(SETTINGS_HEADER, settings_rows(c)),
        "notes": c.notes,
        "functions": functions,
    }
