"""`dormant publish`: a tracked series' results as a Hugging Face dataset repo, or the same files in a folder.

The repo is a store of that one series (its current results, the findings as a table, a dataset card with one
config per table), so `dormant findings`, `report`, `status` and `compare` read it back with
`--store hf://datasets/ORG/NAME` (or the folder), without scoring anything (docs/PUBLISHING.md).
"""

from __future__ import annotations

import sys

from dormant_tasks.grammar import STORED_SERIES, out_option, scores_option, store_option
from dormant_tasks.options import Option

from .options import add_options


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "publish",
        help="publish a tracked series as a Hugging Face dataset repo (or the same files in a folder)",
        description=__doc__.split("\n\n")[0],
    )
    add_options(p, [store_option(), STORED_SERIES])
    where = p.add_mutually_exclusive_group()  # one of them: `run` says so in one line when neither is given
    add_options(
        where,
        [
            Option(
                "--repo-id",
                "the dataset repo to upload to (created when missing), in one commit of the files that changed; the "
                "token from HF_TOKEN or `hf auth login`",
                kw={"metavar": "ORG/NAME"},
            ),
            out_option(
                "instead of uploading, write the repo's files into this folder (new, empty, or this store's "
                "publication of the series: nothing else is replaced)",
                metavar="DIR",
            ),
        ],
    )
    p.add_argument(  # two spellings: the one option whose flags are not one
        "--license",
        "--licence",
        dest="license",
        required=True,  # refused as the line is parsed: before the store and the publishing code are loaded
        metavar="ID",
        help="the licence the published tables are under, as the Hub spells it (e.g. cc-by-4.0, cc0-1.0, mit, "
        "other): required, never guessed",
    )
    add_options(
        p,
        [
            scores_option(
                "the score functions whose findings the findings table holds (default: ahon_ln when tracked)"
            ),
            Option(
                "--with-inputs",
                "also publish the per-input scores and per-item evaluation rows the store keeps (their size is said "
                "before anything is written)",
                kw={"action": "store_true"},
            ),
            Option(
                "--private", "create the repo private (a repo that exists keeps its own)", kw={"action": "store_true"}
            ),
            Option(
                "--allow-foreign",
                "publish into a repo that holds files dormant publish did not write (they are kept; files of the same "
                "name are replaced)",
                kw={"action": "store_true"},
            ),
        ],
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.publishing import check_dataset_repo, check_license, hub_token

    if not (args.repo_id or args.out):
        raise ConfigError("name where to publish: --repo-id ORG/NAME (a Hub dataset repo) or --out DIR (a folder)")
    license = check_license(args.license)  # the cheap refusals first: nothing is read before them
    repo_id = check_dataset_repo(args.repo_id) if args.repo_id else None
    token = hub_token() if repo_id else None
    from dormant_tasks.outputs import Owner, check_folder
    from dormant_tasks.publishing import build_publication, upload_publication, write_publication
    from dormant_tasks.reporting import resolve_model_id

    model_id = resolve_model_id(args.store, args.model)
    if args.out:
        check_folder(args.out, Owner.of("publication", args.store, model_id), option="--out")
    pub = build_publication(
        args.store, model_id, license=license, repo_id=repo_id, with_inputs=args.with_inputs, score_fns=args.scores
    )
    if repo_id is None:  # --out
        note(args, pub.summary())
        folder = write_publication(pub, args.out, args.store)
        print(f"published: {folder} ({len(pub.files)} files)")
        print(f"read it back: dormant findings --store {folder}")
        return 0
    result = upload_publication(
        pub,
        repo_id,
        private=args.private,
        allow_foreign=args.allow_foreign,
        token=token,
        say=lambda line: note(args, line),
    )
    if result.foreign:
        note(
            args, f"left alone: {len(result.foreign)} file(s) dormant publish did not write (e.g. {result.foreign[0]})"
        )
    if result.commit is None:
        print(f"up to date: {result.url} (commit {result.head[:12]}), nothing uploaded")
    else:
        print(f"published: {result.url} (commit {result.commit[:12]}, {len(result.added)} files sent)")
    print(f"read it back: dormant findings --store hf://datasets/{result.repo_id}")
    return 0


def note(args, line: str) -> None:
    print(f"dormant {args.command}: {line}", file=sys.stderr, flush=True)


def published_store(args) -> str:
    """The --store a command reads: a series published on the Hub (`hf://datasets/ORG/NAME`) is fetched into its
    cached, read-only copy for the commands that only read (`add_store_argument(published=True)`), and refused in
    one line by every other; any other --store as given (a published folder is a store already)."""
    store = args.store
    if not str(store).startswith("hf://"):
        return store
    from dormant_tasks.errors import StoreError

    if not getattr(args, "store_published", False):
        raise StoreError(
            f"--store {store} is a series published on the Hub: it is read-only; findings, report, status and compare "
            "read it, and this command needs a store of its own (a folder)"
        )
    from dormant_tasks.publishing import open_published

    return str(open_published(store, say=lambda line: note(args, line)))
