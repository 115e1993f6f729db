"""`dormant findings`: the paper's three training-dynamics findings measured on a tracked series.

Dormant heads emerge early, transition between dormant and active states, and depend on the input text:
each stated with its number, its 95% interval and a figure, from the store only (docs/SCORES.md §7).
"""

from __future__ import annotations

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.grammar import STORED_SERIES, reports_dir_option, scores_option, store_option
from dormant_tasks.options import Option
from dormant_tasks.statistics import paired_fdr_option, statistics_options

from .options import add_options


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "findings",
        help="state the paper's three training-dynamics findings as measured on a tracked series",
        description=__doc__.split("\n\n")[0],
    )
    add_options(
        p,
        [
            store_option(published=True),
            STORED_SERIES,
            scores_option(f"the one score function of the findings (default: {DEFAULT_FN} when tracked)", one=True),
            *statistics_options(),
            paired_fdr_option(),
            Option(
                "--seed-group",
                "series that differ only in their training seed (e.g. PolyPythias' seeds, or `dormant pretrain-tiny "
                "--seed N` runs): each headline number over the seeds, with an interval over seeds beside each seed's "
                "interval over heads (repeat it or separate with commas; instead of --model)",
                kw={"action": "append", "metavar": "SERIES,SERIES,..."},
            ),
            Option(
                "--format",
                "text: plain text; markdown: the Markdown of findings.md; json: every number with its interval, "
                "method, unit and units behind it, for a paper's tables (default: %(default)s)",
                kw={"choices": ("text", "markdown", "json"), "default": "text"},
            ),
            reports_dir_option(
                "also write findings.md and the three figures (PNG + SVG) into this folder (new, empty, or this "
                "store's findings of this series: nothing else is replaced)"
            ),
        ],
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.errors import ConfigError

    if args.scores and len(args.scores) > 1:
        raise ConfigError(f"--scores: the findings are of one function, got {len(args.scores)}; name one")
    from dormant_tasks.findings import findings_json, series_findings
    from dormant_tasks.outputs import Owner, check_folder
    from dormant_tasks.reporting import findings_lines, resolve_model_id, write_findings
    from dormant_tasks.statistics import Resampling
    from dormant_tasks.text import md

    if args.seed_group:
        return seed_group(args)
    model_id = resolve_model_id(args.store, args.model)
    if args.reports_dir:  # before any work
        check_folder(args.reports_dir, Owner.of("findings", args.store, model_id))
    resampling = Resampling(resamples=args.resamples, seed=args.seed)
    found = series_findings(
        args.store,
        model_id,
        args.scores[0] if args.scores else None,
        args.fdr,
        resampling,
        args.fdr_method,
        paired_family=args.paired_fdr,
    )
    if args.format == "json":
        import json

        print(json.dumps(findings_json(found, set_aside=set_aside_record(args.store, model_id)), indent=1))
    else:
        lines = findings_lines(found, esc=md if args.format == "markdown" else str)
        print("\n".join(lines if args.format == "markdown" else map(plain_text, lines)))
    if args.reports_dir:
        written = write_findings(found, args.reports_dir, args.store)
        print(f"\nfindings: {written.summary_md} ({len(written.figures)} figures)")
    return 0


def seed_group(args) -> int:
    """`--seed-group`: the findings of each seed's series, then the numbers over the seeds."""
    import json

    from dormant_tasks.errors import ConfigError
    from dormant_tasks.findings import findings_record, seed_group_findings, series_findings
    from dormant_tasks.reporting import resolve_model_id, seed_group_lines
    from dormant_tasks.statistics import Resampling
    from dormant_tasks.text import md

    if args.model or args.reports_dir:
        raise ConfigError("--seed-group names the series itself and writes no folder: drop --model/--reports-dir")
    names = [n.strip() for group in args.seed_group for n in group.split(",") if n.strip()]
    from dormant_tasks.tracking import shared_weights

    copies = shared_weights(args.store, [resolve_model_id(args.store, n) for n in names])
    if copies is not None:
        raise ConfigError(f"--seed-group: {copies}")
    resampling = Resampling(resamples=args.resamples, seed=args.seed)
    fn = args.scores[0] if args.scores else None
    found = [
        series_findings(args.store, resolve_model_id(args.store, n), fn, args.fdr, resampling, args.fdr_method)
        for n in names
    ]
    group = seed_group_findings(found)
    if args.format == "json":
        print(json.dumps(findings_record(group), indent=1))
    else:
        lines = seed_group_lines(group, esc=md if args.format == "markdown" else str)
        print("\n".join(lines if args.format == "markdown" else map(plain_text, lines)))
    return 0


def set_aside_record(store, model_id: str) -> list[dict]:
    """What the integrity audit set aside of the series, and why (`findings --format json`'s `set_aside`)."""
    from dormant_tasks.tracking import set_aside_checkpoints

    keys = ("revision", "step", "kind", "duplicate_of", "reason", "kept")
    return [{k: r[k] for k in keys} for r in set_aside_checkpoints(store, model_id)]


def plain_text(line: str) -> str:
    """A Markdown line as a terminal shows it: no `**bold**` or `` `code` `` markers."""
    import re

    return re.sub(r"`([^`]*)`", r"\1", re.sub(r"\*\*(.+?)\*\*", r"\1", line))
