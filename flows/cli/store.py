"""`dormant store`: maintain a Parquet store (`upgrade` rewrites a store of an older schema version)."""

from __future__ import annotations

import argparse

from .options import add_store_argument


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "store", help="maintain a Parquet store (upgrade an older schema version)", description=__doc__.splitlines()[0]
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    upgrade = actions.add_parser(
        "upgrade",
        help="rewrite a store of schema version 1 or 2 as the current version (3)",
        description="Rewrite a store of an older schema version in place (atomically "
        "per file, the marker last; rerun it after an interruption).",
    )
    add_store_argument(upgrade)
    upgrade.set_defaults(func=run_upgrade)


def run_upgrade(args: argparse.Namespace) -> int:
    from dormant_tasks.store import SCHEMA_VERSION
    from dormant_tasks.store_upgrade import upgrade_store

    result = upgrade_store(args.store)
    if result.from_version == SCHEMA_VERSION:
        print(f"store {args.store} is already at schema version {SCHEMA_VERSION}: nothing to do")
    else:
        print(
            f"store {args.store}: schema version {result.from_version} -> {SCHEMA_VERSION}, "
            f"{result.files_rewritten} files rewritten, transitions derived again for {result.series_derived} series"
        )
    return 0
