"""`dormant compare`: dormancy of several tracked series side by side (model sizes, families), from the store.

One HTML page with its PNG + SVG figures and summary.md under --reports-dir, and the findings of every series
in one table on stdout (--format markdown or csv); the lines that limit the comparison go to stderr.
"""

from __future__ import annotations

import os
import sys

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.grammar import model_option, reports_dir_option, scores_option, store_option
from dormant_tasks.options import Option

from .options import add_options

# The choices of `dormant_tasks.reporting.compare.COMPARISON_FORMATS` (importing it here would load pyarrow into --help).
FORMATS = ["markdown", "csv"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare tracked series side by side: dormancy across model sizes and families",
        description=__doc__.split("\n\n")[0],
    )
    add_options(
        p,
        [
            store_option(published=True),
            model_option(
                "the series to compare, two or more: Hub ids, local folders or their names, as `dormant status` lists "
                "them; repeat it or separate with commas",
                required=False,
                many=True,
                role="series",
            ),
            Option(
                "--seed-group",
                "instead of --model: two recipes, each a group of series that differ only in seed (give it twice); "
                "each headline number over the seeds and the difference with Welch's t interval",
                kw={"action": "append", "metavar": "SERIES,SERIES,..."},
            ),
            reports_dir_option("the comparison's folder (default: <$DORMANT_REPORTS or ./reports>/compare-A-vs-B/)"),
            scores_option(f"the score functions compared (default: {DEFAULT_FN} when every series tracks it)"),
            Option(
                "--format", "stdout table format (default: %(default)s)", kw={"default": "markdown", "choices": FORMATS}
            ),
        ],
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.errors import ConfigError

    if args.seed_group:
        return seed_groups(args)
    if not args.model:
        raise ConfigError("name two series or more with --model (or two --seed-group)")
    from dormant_tasks.reporting import comparison_table, render_comparison

    result = render_comparison(args.store, args.model, out_dir=args.reports_dir, score_fns=args.scores)
    try:
        print(comparison_table(result.comparison, args.format), flush=True)
    except BrokenPipeError:  # `dormant compare ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    for note in result.comparison.notes:
        print(f"note: {note}", file=sys.stderr)
    if result.index is None:
        print(
            f"note: the store {args.store} takes no file: the series' reports will not link to this comparison",
            file=sys.stderr,
        )
    print(f"compare: {result.index_html} ({len(result.figures)} figures, summary {result.summary_md})", file=sys.stderr)
    return 0


def seed_groups(args) -> int:
    """Two recipes, each a group of seeds: their headline numbers over seeds and the difference (Markdown or CSV)."""
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.findings import compare_seed_groups, seed_group_findings, series_findings
    from dormant_tasks.reporting import resolve_model_id

    if len(args.seed_group) != 2 or args.model:
        raise ConfigError("--seed-group: give it twice (recipe a, recipe b), each SERIES,SERIES,..., without --model")
    groups = [[n.strip() for n in group.split(",") if n.strip()] for group in args.seed_group]
    both = sorted(set(groups[0]) & set(groups[1]))
    if both:
        raise ConfigError(f"--seed-group: {', '.join(both)} is in both groups; two recipes share no seed's series")
    fn = args.scores[0] if args.scores else None
    a, b = (
        seed_group_findings([series_findings(args.store, resolve_model_id(args.store, n), fn) for n in group])
        for group in groups
    )
    diffs = compare_seed_groups(a, b)
    try:
        _print_groups(args.format, a, b, diffs)
    except BrokenPipeError:  # `dormant compare ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print_groups(fmt: str, a, b, diffs) -> None:
    from dormant_tasks.reporting import seed_comparison_lines

    if fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(
            ["number", "unit", "a", "a_low", "a_high", "b", "b_low", "b_high", "difference", "low", "high", "method"]
        )
        for d in diffs:
            writer.writerow(
                [
                    d.name,
                    d.unit,
                    *(v for e in (d.a, d.b, d.difference) for v in (e.value, e.low, e.high)),
                    d.difference.method,
                ]
            )
    else:
        print("\n".join(seed_comparison_lines(a, b, diffs)), flush=True)
