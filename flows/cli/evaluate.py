"""`dormant evaluate`: zero the heads a score function marks, re-score WinoGrande, print the leaderboard metric.

Dynamic mode (the paper's protocol): thresholds at the 0-30% quantiles of each function's per-input scores;
in every layer the heads below threshold on an input are zeroed before o_proj. The metric is the largest
% of heads zeroed with accuracy within 1 point of the un-intervened model. Static mode zeroes the tracker's
dormancy mask of the checkpoint (from the store); `--series` does so for every tracked checkpoint.
Few-shot examples (`--shots N`) come from other WinoGrande dev items than the one scored.
"""

from __future__ import annotations

import argparse

from .options import add_device_argument, add_dtype_argument, add_store_argument


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="zero marked heads, re-score WinoGrande, leaderboard metric",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="PATH_OR_REPO",
        help="checkpoint folder or Hub repo (with --series: the tracked repo or series folder; required)",
    )
    parser.add_argument("--revision", metavar="REV", help="Hub revision (branch) of --model")
    parser.add_argument("--task", default="winogrande", metavar="TASK", help="evaluation task (default: %(default)s)")
    parser.add_argument(
        "--shots",
        type=int,
        default=0,
        metavar="N",
        help="few-shot examples from other dev items (default: %(default)s)",
    )
    parser.add_argument(
        "--scores",
        nargs="+",
        default=["ahon_ln", "lthon_ln", "awft"],
        metavar="FN",
        help="score functions (default: ahon_ln lthon_ln awft)",
    )
    parser.add_argument(
        "--mode",
        choices=["dynamic", "static"],
        help="dynamic: the paper's per-input zeroing; static: the tracker's mask "
        "(default: dynamic, static with --series)",
    )
    parser.add_argument(
        "--series", action="store_true", help="evaluate the static tracker mask of every stored checkpoint of --model"
    )
    parser.add_argument(
        "--quantiles",
        type=float,
        nargs="+",
        metavar="Q",
        help="dynamic thresholds as quantiles of the un-intervened scores (default: 0 .05 ... .30)",
    )
    parser.add_argument("--limit", type=int, metavar="N", help="first N dev items (default: all 1,267)")
    add_store_argument(parser)
    parser.add_argument(
        "--batch-size", type=int, default=16, metavar="N", help="items per forward pass (default: %(default)s)"
    )
    add_dtype_argument(parser)
    add_device_argument(parser, "run")
    parser.set_defaults(func=run)


def request_from_args(args: argparse.Namespace):
    from dormant_tasks.requests import DEFAULT_QUANTILES, EvalRequest

    return EvalRequest(
        model=args.model,
        store=args.store,
        revision=args.revision,
        series=args.series,
        task=args.task,
        shots=args.shots,
        score_fns=tuple(args.scores),
        mode=args.mode,
        quantiles=tuple(args.quantiles) if args.quantiles else DEFAULT_QUANTILES,
        limit=args.limit,
        batch_size=args.batch_size,
        dtype=args.dtype,
        device=args.device,
    )


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.evaluation import check_task
    from dormant_tasks.interventions import format_leaderboard, request_targets
    from dormant_tasks.store import check_store
    from flows.evaluate import evaluate

    # Validate before Prefect starts: a bad option costs nothing and writes nothing.
    request = request_from_args(args)
    check_task(request.task)
    check_store(request.store, writable=True)
    targets = request_targets(request)
    from flows.session import start_prefect

    start_prefect()
    rows = evaluate(request)
    for target in targets:
        print(format_leaderboard(target, [r for r in rows if r["revision"] == target.revision.name]))
    print(f"evaluations written to {request.store}")
    return 0


def interrupted(args: argparse.Namespace) -> str:
    return "interrupted: the evaluations of finished checkpoints are stored, rerun the rest"
