"""`dormant store`: maintain a Parquet store (upgrade an older schema version, repair, drop kept input scores)."""

from __future__ import annotations

import argparse

from .options import add_model_argument, add_store_argument


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "store",
        help="maintain a Parquet store (upgrade, repair, gc)",
        description=__doc__.splitlines()[0],
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    upgrade = actions.add_parser(
        "upgrade",
        help="rewrite a store of schema version 1, 2 or 3 as the current version (4)",
        description="Rewrite a store of an older schema version in place (atomically "
        "per file, the marker last; rerun it after an interruption).",
    )
    add_store_argument(upgrade, use="writes")
    upgrade.set_defaults(func=run_upgrade)
    repair = actions.add_parser(
        "repair",
        help="make the manifests agree with the files (after a file was deleted by hand)",
        description="Rebuild a missing manifest from the rows its head_scores files keep (or refuse, deleting "
        "nothing), drop manifest rows whose head_scores file is missing (the next `dormant track` scores "
        "those checkpoints again), unmark input scores whose file is missing, and delete result files that no "
        "manifest row names (left by a killed writer).",
    )
    add_store_argument(repair, use="writes")
    add_model_argument(
        repair, "repair one series: its Hub id, folder or name (default: every series)", required=False, role="series"
    )
    repair.set_defaults(func=run_repair)
    gc = actions.add_parser(
        "gc",
        help="drop kept per-input scores (masks stay; --retau then rescores)",
        description="Drop the per-input scores kept by `dormant track --input-scores keep|auto`: the masks, "
        "transitions and reports stay; a later `--retau` loads the models again instead of re-aggregating.",
    )
    add_store_argument(gc, use="writes")
    add_model_argument(
        gc, "one series: its Hub id, folder or name (default: every series)", required=False, role="series"
    )
    gc.set_defaults(func=run_gc)


def run_upgrade(args: argparse.Namespace) -> int:
    from dormant_tasks.store.io import SCHEMA_VERSION
    from dormant_tasks.store.upgrade import upgrade_store

    result = upgrade_store(args.store)
    if result.from_version == SCHEMA_VERSION and result.files_rewritten:
        print(
            f"store {args.store}: schema version {SCHEMA_VERSION}, {result.files_rewritten} derived files brought up "
            "to date (transitions' q-values, the Jaccard of two empty masks)"
        )
    elif result.from_version == SCHEMA_VERSION:
        print(f"store {args.store} is already at schema version {SCHEMA_VERSION}: nothing to do")
    else:
        print(
            f"store {args.store}: schema version {result.from_version} -> {SCHEMA_VERSION}, "
            f"{result.files_rewritten} files rewritten, transitions derived again for {result.series_derived} series"
        )
    return 0


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def run_repair(args: argparse.Namespace) -> int:
    from dormant_tasks.store.repair import repair_store

    r = repair_store(args.store, args.model)
    if not (r.rebuilt or r.dropped or r.unkept or r.orphans):
        print(f"store {args.store}: manifests and files agree, nothing to repair")
        return 0
    for name in r.rebuilt:
        print(f"rebuilt the manifest of {name} from its head_scores files")
    for name in r.dropped:
        print(f"dropped {name}: its head_scores file was missing (`dormant track` scores it again)")
    for name in r.unkept:
        print(f"{name}: its input_scores file was missing; its mask stays, without per-input scores")
    print(f"store {args.store}: {len(r.orphans)} unreferenced files deleted ({_mb(r.bytes_freed)})")
    return 0


def run_gc(args: argparse.Namespace) -> int:
    from dormant_tasks.store.repair import gc_store

    r = gc_store(args.store, args.model)
    print(
        f"store {args.store}: per-input scores dropped for {r.checkpoints} checkpoints "
        f"({r.files} files, {_mb(r.bytes_freed)} freed)"
    )
    return 0
