"""`dormant checkpoints`: list the checkpoints of a Hub repo or a local series folder, in training order.

The selection options are defined once here (`add_selection_arguments`, `selection_from_args`) and
reused by `dormant track`.
"""

from __future__ import annotations

import argparse
import sys

from .options import add_model_argument, add_store_argument


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that pick which checkpoints of a series to analyse (see `Selection` for their order)."""
    group = parser.add_argument_group("checkpoint selection (applied in this order)")
    group.add_argument(
        "--revisions",
        action="append",
        metavar="GLOB",
        default=[],
        help="keep revisions whose name matches this fnmatch pattern, e.g. 'stage1-*' (repeatable)",
    )
    group.add_argument("--steps", metavar="A:B", help="keep steps A..B inclusive; either side may be left out")
    group.add_argument(
        "--every", type=int, metavar="N", help="keep every N-th checkpoint in training order, starting with the first"
    )
    group.add_argument(
        "--max",
        type=int,
        metavar="N",
        dest="max_n",
        help="keep N checkpoints spread evenly in log(tokens), always the first and the last",
    )
    group.add_argument(
        "--include-main", action="store_true", help="also list the `main` revision (the final model), ordered last"
    )


def add_tokens_per_step_argument(parser: argparse.ArgumentParser) -> None:
    """The token axis of a series whose checkpoint names carry no token count (`step1000`, `ckpt_010`)."""
    parser.add_argument(
        "--tokens-per-step",
        type=int,
        metavar="N",
        help="tokens per training step, for checkpoint names without a token count (step1000, ckpt_010): "
        "sequences per batch x sequence length (default: known for EleutherAI/pythia-*, 2,097,152)",
    )


def selection_from_args(args: argparse.Namespace):
    from dormant_tasks.checkpoints import Selection

    return Selection(tuple(args.revisions), args.steps, args.every, args.max_n)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "checkpoints", help="list the checkpoints of a Hub repo or a local series", description=__doc__.splitlines()[0]
    )
    add_model_argument(
        parser,
        "the series: a Hub repo id (e.g. allenai/OLMo-2-0425-1B), a folder of checkpoint folders, or the name of a "
        "local series the store keeps",
    )
    add_tokens_per_step_argument(parser)
    add_store_argument(parser, use="optional")
    add_selection_arguments(parser)
    audit = parser.add_argument_group("integrity audit (docs/CHECKPOINTS.md, Integrity)")
    audit.add_argument(
        "--audit",
        action="store_true",
        help="compare every branch's files (Hub: one tree listing per branch, LFS sha256 / blob ids and sizes, no "
        "weights downloaded; a folder: file hashes): full and partial duplicates, incomplete branches, token counts "
        "that disagree with the series, config changes, which step main is",
    )
    audit.add_argument(
        "--format", default="text", choices=("text", "json", "csv"), help="--audit's output (default: %(default)s)"
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
