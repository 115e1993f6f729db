"""`dormant report`: render a series' evolution report (index.html, PNG + SVG figures, summary.md)."""

from __future__ import annotations

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.grammar import STORED_SERIES, reports_dir_option, scores_option, store_option
from dormant_tasks.options import Option
from dormant_tasks.statistics import paired_fdr_option, statistics_options

from .options import add_options


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="render the evolution report of a tracked model series", description=__doc__.splitlines()[0]
    )
    add_options(
        p,
        [
            store_option(published=True),
            STORED_SERIES,
            reports_dir_option(),
            scores_option(
                f"the one function of the per-function figures (default: {DEFAULT_FN} when tracked)", one=True
            ),
            Option(
                "--hide-blips",
                "draw the raster with blips undone: a head that changes state at a checkpoint and changes back at the "
                "next one is shown in its earlier state there (docs/SCORES.md, Confidence)",
                kw={"action": "store_true"},
            ),
            *statistics_options(),
            paired_fdr_option(),
        ],
    )
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
        paired_fdr=args.paired_fdr,
    )
    result = render_report(args.store, args.model, args.reports_dir, settings, progress=True)
    print(f"report: {result.index_html} ({len(result.figures)} figures, summary {result.summary_md})")
    return 0
