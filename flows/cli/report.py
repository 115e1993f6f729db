"""`dormant report`: render a series' evolution report (index.html, PNG + SVG figures, summary.md)."""

from __future__ import annotations

from .options import add_store_argument


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="render the evolution report of a tracked model series", description=__doc__.splitlines()[0]
    )
    add_store_argument(p)
    p.add_argument(
        "--model",
        default=None,
        metavar="MODEL_ID",
        help="the series: a Hub repo id or a local series' folder name, as `dormant status` lists them "
        "(default: the store's only series)",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="report folder (default: <$DORMANT_REPORTS or ./reports>/<series slug>/)",
    )
    p.add_argument(
        "--score-fn",
        default=None,
        metavar="FN",
        help="function of the per-function figures (default: ahon_ln when tracked)",
    )
    p.add_argument(
        "--hide-blips",
        action="store_true",
        help="draw the raster with blips undone: a head that changes state at a checkpoint and changes back at "
        "the next one is shown in its earlier state there (docs/SCORES.md, Confidence)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.reporting.report import render_report

    result = render_report(
        args.store, args.model, out_dir=args.out, score_fn=args.score_fn, progress=True, hide_blips=args.hide_blips
    )
    print(f"report: {result.index_html} ({len(result.figures)} figures, summary {result.summary_md})")
    return 0
