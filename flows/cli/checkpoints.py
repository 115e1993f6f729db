"""`dormant checkpoints`: list the checkpoints of a Hub repo or a local series folder, in training order.

The selection options are declared once (`dormant_tasks.options.SELECTION`), for `track`'s request and here.
"""

from __future__ import annotations

import argparse
import sys

from dormant_tasks.grammar import INCLUDE_MAIN, SELECTION, TOKENS_PER_STEP, model_option, store_option
from dormant_tasks.options import Option

from .options import add_options

AUDIT = "integrity audit (docs/CHECKPOINTS.md, Integrity)"


def selection_from_args(args: argparse.Namespace):
    from dormant_tasks.checkpoints import Selection

    return Selection(tuple(args.revisions), args.steps, args.every, args.max_n)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "checkpoints", help="list the checkpoints of a Hub repo or a local series", description=__doc__.splitlines()[0]
    )
    add_options(
        parser,
        [
            model_option(
                "the series: a Hub repo id (e.g. allenai/OLMo-2-0425-1B), a folder of checkpoint folders, or the name "
                "of a local series the store keeps"
            ),
            TOKENS_PER_STEP,
            store_option(use="optional"),
            *SELECTION,
            INCLUDE_MAIN,
            Option(
                "--audit",
                "compare every branch's files (Hub: one tree listing per branch, LFS sha256 / blob ids and sizes, no "
                "weights downloaded; a folder: file hashes): full and partial duplicates, incomplete branches, token "
                "counts that disagree with the series, config changes, which step main is",
                AUDIT,
                {"action": "store_true"},
            ),
            Option(
                "--format",
                "--audit's output (default: %(default)s)",
                AUDIT,
                {"default": "text", "choices": ("text", "json", "csv")},
            ),
        ],
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.checkpoints import format_tokens, list_revisions

    selection = selection_from_args(args)  # validates the options before any network call
    if args.audit:
        return run_audit(args)
    if args.format != "text":
        from dormant_tasks.errors import ConfigError

        raise ConfigError(f"--format {args.format} is the form of --audit's table: add --audit, or drop --format")
    listing = list_revisions(args.model, include_main=args.include_main, tokens_per_step=args.tokens_per_step)
    selected = selection.apply(listing.revisions)
    rows = [("name", "stage", "ingredient", "step", "tokens", "commit")]
    for r in selected:
        rows.append(
            (
                r.name,
                "?" if r.is_main else str(r.stage),
                "" if r.ingredient is None else str(r.ingredient),
                "?" if r.is_main else str(r.step),
                format_tokens(r.tokens),
                (r.commit or "local")[:10],
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    print(
        f"{len(selected)} of {len(listing.revisions)} checkpoints of {listing.source} "
        f"({listing.kind}); selection: {selection.describe()}"
    )
    if listing.skipped:
        from dormant_tasks.checkpoints import skipped_note

        print(f"note: {skipped_note(listing.skipped)}", file=sys.stderr)  # stderr: stdout is the table and its summary
    return 0


def run_audit(args: argparse.Namespace) -> int:
    """`--audit`: every branch of the series (main included; the selection does not apply: a duplicate is a
    duplicate of any branch)."""
    import csv
    import json

    from dormant_tasks.checkpoints import audit_series, format_audit

    audit = audit_series(args.model, tokens_per_step=args.tokens_per_step)
    if args.format == "json":
        print(
            json.dumps(
                {
                    "source": audit.source,
                    "tokens_per_step": audit.tokens_per_step,
                    "tokens_per_step_from": audit.tokens_source or None,
                    "seconds": round(audit.seconds, 3),
                    "branches": audit.rows(),
                },
                indent=2,
            )
        )
    elif args.format == "csv":
        rows = audit.rows()
        writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        print("\n".join(format_audit(audit)))
    return 0
