"""`dormant reproduce xu-2026 --model REPO`: Xu's head-role emergence table, tracked and printed beside the paper's.

Thin: the study's reference (`findings.xu2026`: the 10 revisions Xu tracked, by name, and the dtype Xu ran) makes
one `dormant track` run of those revisions on the induction probe with the role functions (the track command's
own path: its checks, its store, its `--dry-run`, which says what would be downloaded), then the series' role
shares (`findings.role_shares`) are printed per revision beside the published first-token shares and their
difference.
"""

from __future__ import annotations

import sys

from dormant_tasks.grammar import device_option, model_option, store_option
from dormant_tasks.options import Option

from .options import add_options

STUDIES = ("xu-2026",)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "reproduce",
        help="track the revisions of a published head-role table and print ours beside the published numbers",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "study",
        nargs="?",
        default=STUDIES[0],
        choices=STUDIES,
        help="the published table: xu-2026 (Xu, arXiv 2606.02378) (default: %(default)s)",
    )
    add_options(
        p,
        [
            model_option(
                "one of the study's models: allenai/OLMo-1B-0724-hf, EleutherAI/pythia-1b, allenai/OLMoE-1B-7B-0924"
            ),
            store_option("updates"),
            device_option("score"),
            Option(
                "--limit",
                "probe sequences to score (default: the study's 2,000; fewer on a small machine)",
                kw={"type": int, "metavar": "N"},
            ),
            Option(
                "--dry-run",
                "say what would be downloaded and scored; download and write nothing",
                kw={"action": "store_true"},
            ),
        ],
    )
    p.set_defaults(func=run)


def track_argv(args, model) -> list[str]:
    """The `dormant track` line this reproduction runs."""
    argv = ["track", "--model", args.model, "--store", str(args.store), "--calibration", "induction-probe"]
    argv += ["--scores", "ahon_ln,roles", "--dtype", model.dtype, "--no-report"]
    for name in model.revisions:
        argv += ["--revisions", name]
    if args.limit:
        argv += ["--limit", str(args.limit)]
    if args.device:
        argv += ["--device", str(args.device)]
    return argv + (["--dry-run"] if args.dry_run else [])


def run(args) -> int:
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.findings import comparison, format_comparison, xu_model

    from . import build_parser

    model = xu_model(args.model)
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    track = build_parser().parse_args(track_argv(args, model))
    if not args.dry_run:
        print(f"dormant reproduce: {len(model.revisions)} revisions of {args.model} ({model.dtype})", file=sys.stderr)
    code = track.func(track)
    if args.dry_run:
        return code
    from dormant_tasks.findings import role_shares
    from dormant_tasks.tracking import open_views

    views = open_views(args.store, args.model)
    rows = comparison(model, role_shares(views))
    print(format_comparison(model, rows))
    missing = [r.revision for r in rows if r.ours is None]
    if missing:
        print(f"dormant reproduce: not in the series (not listed, or failed): {', '.join(missing)}", file=sys.stderr)
    return code
