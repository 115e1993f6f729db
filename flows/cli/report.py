"""`dormant report`: render a series' evolution report (index.html, PNG + SVG figures, summary.md)."""

from __future__ import annotations

from dormant_tasks.engine import DEFAULT_FN

from .options import (
    add_reports_dir_argument,
    add_scores_argument,
    add_statistics_arguments,
    add_store_argument,
    add_stored_series_argument,
)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="render the evolution report of a tracked model series", description=__doc__.splitlines()[0]
    )
    add_store_argument(p, published=True)
    add_stored_series_argument(p)
    add_reports_dir_argument(p)
    add_scores_argument(
        p, f"the one function of the per-function figures (default: {DEFAULT_FN} when tracked)", one=True
    )
    p.add_argument(
        "--hide-blips",
        action="store_true",
        help="draw the raster with blips undone: a head that changes state at a checkpoint and changes back at "
        "the next one is shown in its earlier state there (docs/SCORES.md, Confidence)",
    )
    add_statistics_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.errors import ConfigError

    if args.scores and len(args.scores) > 1:
        raise ConfigError(f"--scores: the report draws one function, got {len(args.scores)}; name one")
    from dormant_tasks.reporting import ReportSettings, render_report
    from dormant_tasks.statistics import Resampling

    settings = ReportSettings(
        score_fn=args.scores[0] if args.scores else None,
        hide_blips=args.hide_blips,
        fdr=args.fdr,
        fdr_method=args.fdr_method,
        resampling=Resampling(resamples=args.resamples, seed=args.seed),
    )
    result = render_report(args.store, args.model, args.reports_dir, settings, progress=True)
    print(f"report: {result.index_html} ({len(result.figures)} figures, summary {result.summary_md})")
    return 0
