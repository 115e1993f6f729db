"""`dormant evaluate`: zero the heads a score function marks, re-score WinoGrande, print the leaderboard metric.

Dynamic mode (the paper's protocol): thresholds at the 0-30% quantiles of each function's per-input scores;
in every layer the heads below threshold on an input are zeroed before o_proj. The metric is the largest
% of heads zeroed with accuracy within 1 point of the un-intervened model. Static mode zeroes the tracker's
dormancy mask of the checkpoint (from the store); `--series` does so for every tracked checkpoint.
Few-shot examples (`--shots K`) come from other WinoGrande dev items than the one scored.
"""

from __future__ import annotations

import argparse

from dormant_tasks.store import DEFAULT_STORE


def add_parser(subparsers) -> None:
    from dormant_tasks.leaderboard import DEFAULT_SCORES

    parser = subparsers.add_parser("evaluate", help="zero marked heads, re-score WinoGrande, leaderboard metric",
                                   description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, metavar="PATH_OR_REPO",
                        help="checkpoint folder or Hub repo (with --series: the tracked repo or series folder)")
    parser.add_argument("--revision", help="Hub revision (branch) of --model")
    parser.add_argument("--task", default="winogrande", help="evaluation task (default: %(default)s)")
    parser.add_argument("--shots", type=int, default=0, help="few-shot examples from other dev items (default: 0)")
    parser.add_argument("--scores", nargs="+", default=list(DEFAULT_SCORES), metavar="FN",
                        help="score functions (default: %(default)s)")
    parser.add_argument("--mode", default="dynamic", choices=["dynamic", "static"])
    parser.add_argument("--series", action="store_true",
                        help="evaluate the static tracker mask of every stored checkpoint of --model")
    parser.add_argument("--quantiles", type=float, nargs="+", metavar="Q",
                        help="dynamic thresholds as quantiles of the un-intervened scores (default: 0 .05 ... .30)")
    parser.add_argument("--limit", type=int, metavar="N", help="first N dev items (default: all 1,267)")
    parser.add_argument("--store", default=str(DEFAULT_STORE), help="Parquet store (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.evaluation import check_task
    from dormant_tasks.leaderboard import format_leaderboard, series_targets, single_target
    from dormant_tasks.loading import resolve_device, resolve_dtype
    from dormant_tasks.score_functions import parse_score_functions
    from flows.evaluate import evaluate

    # Validate before Prefect starts: a bad option costs nothing and writes nothing.
    check_task(args.task)
    fns = parse_score_functions(args.scores)
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    if args.shots < 0:
        raise ConfigError(f"--shots must be 0 or more, got {args.shots}")
    if args.quantiles and not all(0.0 <= q <= 1.0 for q in args.quantiles):
        raise ConfigError(f"--quantiles must be fractions in [0, 1] (e.g. 0.05 for 5%), got {args.quantiles}")
    resolve_dtype(args.dtype), resolve_device(args.device)
    targets = series_targets(args.store, args.model) if args.series else [single_target(args.model, args.revision)]
    rows = evaluate(model=args.model, revision=args.revision, task=args.task, shots=args.shots, scores=tuple(fns),
                    mode=args.mode, limit=args.limit, store=args.store, series=args.series,
                    batch_size=args.batch_size, dtype=args.dtype, device=args.device,
                    quantiles=tuple(args.quantiles) if args.quantiles else None)
    for target in targets:
        print(format_leaderboard(target, [r for r in rows if r["revision"] == target.revision.name]))
    print(f"evaluations written to {args.store}")
    return 0
