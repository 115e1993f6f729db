"""`dormant compare`: dormancy of several tracked series side by side (model sizes, families), from the store.

One HTML page with its PNG + SVG figures and summary.md under --reports-dir, and the findings of every series
in one table on stdout (--format markdown or csv); the lines that limit the comparison go to stderr.
"""

from __future__ import annotations

import os
import sys

from .options import add_model_argument, add_reports_dir_argument, add_scores_argument, add_store_argument

# The choices of `dormant_tasks.reporting.compare.COMPARISON_FORMATS` (importing it here would load pyarrow into --help).
FORMATS = ["markdown", "csv"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare tracked series side by side: dormancy across model sizes and families",
        description=__doc__.split("\n\n")[0],
    )
    add_store_argument(p)
    add_model_argument(
        p,
        "the series to compare, two or more: Hub ids, local folders or their names, as `dormant status` lists "
        "them; repeat it or separate with commas",
        required=True,
        many=True,
        role="series",
    )
    add_reports_dir_argument(p, "the comparison's folder (default: <$DORMANT_REPORTS or ./reports>/compare-A-vs-B/)")
    add_scores_argument(p, "the score functions compared (default: ahon_ln when every series tracks it)")
    p.add_argument("--format", default="markdown", choices=FORMATS, help="stdout table format (default: %(default)s)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.reporting import comparison_table, render_comparison

    result = render_comparison(args.store, args.model, out_dir=args.reports_dir, score_fns=args.scores)
    try:
        print(comparison_table(result.comparison, args.format), flush=True)
    except BrokenPipeError:  # `dormant compare ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    for note in result.comparison.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"compare: {result.index_html} ({len(result.figures)} figures, summary {result.summary_md})", file=sys.stderr)
    return 0
