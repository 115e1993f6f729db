"""`dormant report`: render a series' evolution report (index.html, PNG + SVG figures, summary.md)."""

from __future__ import annotations

from dormant_tasks.report import DEFAULT_REPORTS, render_report
from dormant_tasks.store import DEFAULT_STORE


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="render the evolution report of a tracked model series")
    p.add_argument("--store", default=str(DEFAULT_STORE), help="store folder (default: %(default)s)")
    p.add_argument("--model", default=None, help="model id of the series (optional when the store holds one)")
    p.add_argument("--out", default=None, help=f"report folder (default: {DEFAULT_REPORTS}/<series slug>/)")
    p.add_argument("--score-fn", default=None,
                   help="function of the per-function figures (default: ahon_ln when tracked)")
    p.set_defaults(func=run)


def run(args) -> int:
    result = render_report(args.store, args.model, out_dir=args.out, score_fn=args.score_fn, progress=True)
    print(f"report: {result.index_html} ({len(result.figures)} figures, summary {result.summary_md})")
    return 0
