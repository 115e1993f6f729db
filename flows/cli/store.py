"""`dormant store`: maintain a Parquet store (upgrade an older schema version, repair, drop kept input scores)."""

from __future__ import annotations

import argparse
import sys

from dormant_tasks.grammar import model_option, store_option
from dormant_tasks.options import Option

from .options import add_options

NO_WAIT = Option(
    "--no-wait",
    "when another run is writing a series, stop at once (exit 2) instead of waiting for it",
    kw={"action": "store_true"},
)


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
    add_options(upgrade, [store_option(use="writes")])
    upgrade.set_defaults(func=run_upgrade)
    repair = actions.add_parser(
        "repair",
        help="set damaged files aside and make the manifests agree with the files",
        description="Move damaged files (truncated, bytes changed: size, content checksum and page checksums "
        "checked) aside into <store>/_quarantine/ (never deleted), rebuild a missing or damaged manifest from "
        "the rows its head_scores files keep (or refuse, changing nothing), drop manifest rows whose head_scores "
        "file is missing, or a file damaged (the next `dormant track` scores those checkpoints again), unmark input "
        "scores whose file is missing, delete result files that no manifest row names (left by a "
        "killed writer), and derive transitions, histories and agreement again where they are missing, damaged "
        "or stale.",
    )
    add_options(
        repair,
        [
            store_option(use="writes"),
            Option(
                "--check",
                "only report damaged files, by name (exit 2 when there are any); writes nothing, so it runs on a full "
                "disk or a read-only store",
                kw={"action": _CheckOnly, "nargs": 0},
            ),
            NO_WAIT,
            model_option(
                "repair one series: its Hub id, folder or name (default: every series)", required=False, role="series"
            ),
        ],
    )
    repair.set_defaults(func=run_repair)
    gc = actions.add_parser(
        "gc",
        help="drop kept per-input scores (masks stay; --retau then rescores)",
        description="Drop the per-input scores kept by `dormant track --input-scores keep|auto`: the masks, "
        "transitions and reports stay; a later `--retau` loads the models again instead of re-aggregating.",
    )
    add_options(
        gc,
        [
            store_option(use="writes"),
            model_option(
                "one series: its Hub id, folder or name (default: every series)", required=False, role="series"
            ),
            NO_WAIT,
        ],
    )
    gc.set_defaults(func=run_gc)


class _CheckOnly(argparse.Action):
    """`repair --check` reads the store only: its --store is checked as a read (no probe file is written)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        namespace.check = True
        namespace.store_use = "reads"


def run_upgrade(args: argparse.Namespace) -> int:
    from dormant_tasks.store import SCHEMA_VERSION, store_links
    from dormant_tasks.tracking import upgrade_store

    result = upgrade_store(args.store)
    for link in store_links(args.store):
        print(_link_note(link))
    if result.from_version == SCHEMA_VERSION and result.files_rewritten:
        print(
            f"store {args.store}: schema version {SCHEMA_VERSION}, {result.files_rewritten} derived files brought up "
            "to date (transitions decided by confident states, the Jaccard of two empty masks)"
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


def check_series(store, model: str | None) -> None:
    """StoreError for a `--model` the store does not keep: before anything (a lock file) is written for it."""
    from dormant_tasks.errors import StoreError, did_you_mean
    from dormant_tasks.store import list_models

    models = list_models(store)
    if model is not None and model not in models:
        raise StoreError(
            f"--model {model}: the store keeps no such series{did_you_mean(model, models)}; it holds: "
            f"{', '.join(models) or 'none'} (`dormant status` lists them)"
        )


def run_repair(args: argparse.Namespace) -> int:
    import contextlib

    from dormant_tasks.errors import StoreError
    from dormant_tasks.store import (
        Table,
        all_series,
        damaged_files,
        hold_series,
        repair_store,
        store_folder,
        store_links,
    )
    from dormant_tasks.tracking import SeriesView, rederive, set_aside_stored_duplicates

    check_series(args.store, args.model)
    root = store_folder(args.store)
    if args.check:  # reads only: no lock, no temp file (a full disk or a read-only store is checked all the same)
        damage = damaged_files(root, args.model)
        for link in store_links(root, args.model):
            print(_link_note(link))
        for d in damage:
            print(f"dormant store repair: damaged: {d.path.relative_to(root)} ({d.reason})", file=sys.stderr)
        if damage:
            raise StoreError(
                f"{len(damage)} damaged file{'s' if len(damage) != 1 else ''} in store {args.store}; run `dormant "
                f"store repair --store {args.store}` to move them aside"
            )
        print(f"store {args.store}: every file is whole (sizes, checksums, pages)")
        return 0
    every = [args.model] if args.model else all_series(root)
    with contextlib.ExitStack() as stack:
        for series in every:
            stack.enter_context(hold_series(root, series, wait=not args.no_wait))
        r = repair_store(args.store, args.model)
        duplicates = {}
        for series in every:  # derived tables: missing, damaged or stale ones derived again
            if SeriesView.exists(root, series):
                duplicates[series] = set_aside_stored_duplicates(root, series)  # tracked before the audit
                rederive(root, series)
    for link in r.links:
        print(_link_note(link))
    for series, names in duplicates.items():
        if names:
            print(
                f"{series}: set aside {len(names)} stored duplicate{'s' if len(names) != 1 else ''} of another step "
                f"({', '.join(names)}): transitions derived again without them"
            )
    if r.digested:
        print(f"recorded the scores digest of {r.digested} results stored before it (`dormant status` compares them)")
    if r.summed:
        print(f"recorded the checksums of {r.summed} whole files that had none (written before the store kept them)")
    if not (r.rebuilt or r.dropped or r.unkept or r.orphans or r.quarantined or any(duplicates.values())):
        print(f"store {args.store}: manifests and files agree, nothing to repair")
        return 0
    for d, target in r.quarantined:
        print(f"moved damaged {d.path.relative_to(root)} ({d.reason}) aside to {target.relative_to(root)}")
        if d.table == Table.taus:
            print(f"  the taus of {d.model_id} are gone: the next `dormant track` with its options fixes them again")
    for name in r.rebuilt:
        print(f"rebuilt the manifest of {name} from its head_scores files")
    for name in r.dropped:
        print(f"dropped {name}: a file of it was missing or damaged (the next `dormant track` scores it again)")
    for name in r.unkept:
        print(f"{name}: its input_scores file was missing; its mask stays, without per-input scores")
    print(f"store {args.store}: {len(r.orphans)} unreferenced files deleted ({_mb(r.bytes_freed)})")
    return 0


def run_gc(args: argparse.Namespace) -> int:
    from dormant_tasks.store import gc_store

    check_series(args.store, args.model)
    r = gc_store(args.store, args.model, wait=not args.no_wait)
    print(
        f"store {args.store}: per-input scores dropped for {r.checkpoints} checkpoints "
        f"({r.files} files, {_mb(r.bytes_freed)} freed)"
    )
    for link in r.links:
        print(_link_note(link))
    return 0


def _link_note(link) -> str:
    return f"note: {link} is a symbolic link: left alone, not followed (the store deletes only its own files)"
