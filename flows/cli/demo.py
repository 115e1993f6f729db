"""`dormant demo`: pretrain the tiny OLMo-2 series offline, track it, render its report (`make demo`)."""

from __future__ import annotations

import argparse
import time

from dormant_tasks.grammar import SERIES_NAME, model_option, reports_dir_option, store_option, threads_option
from dormant_tasks.options import Option

from .options import add_options
from .pretrain_tiny import SEED, STEPS

# The demo tracks three kinds of text at once: does a head fall dormant on all of them, or on some?
DEMO_CALIBRATION = ("winogrande", "wikipedia", "code")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo", help="the offline demo: pretrain a tiny OLMo-2, track it, report", description=__doc__.splitlines()[0]
    )
    add_options(
        parser,
        [
            model_option(
                "folder of the tiny series, made by `dormant pretrain-tiny` (default: ./data/series/tiny-olmo2)",
                required=False,
                role="new",
            ),
            store_option(use="writes"),
            SERIES_NAME,
            STEPS,
            SEED,
            threads_option(),
            Option(
                "--seeds",
                "pretrain and track N series of seeds --seed, --seed + 1, ... (the first in --model's folder, the "
                "others beside it as <folder>-seed<S>) and state the findings over the seeds: seeds are the unit of "
                "replication (default: %(default)s)",
                kw={"type": int, "default": 1, "metavar": "N"},
            ),
            Option(
                "--limit",
                "texts per calibration set (default: %(default)s)",
                kw={"type": int, "default": 128, "metavar": "N"},
            ),
            Option(
                "--calibration",
                f"calibration sets, repeatable (default: {' '.join(DEMO_CALIBRATION)}; see `dormant track --help`)",
                kw={"action": "append", "metavar": "NAME"},
            ),
            reports_dir_option(),
        ],
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.errors import ConfigError
    from flows.demo import DEMO_SERIES

    if args.seeds < 1:
        raise ConfigError(f"--seeds {args.seeds}: give 1 or more")
    if args.seeds > 1 and args.series_name:
        raise ConfigError("--seeds names each series after its folder: drop --series-name")
    base = str(args.model or DEMO_SERIES)
    codes, model_ids = [], []
    for i in range(args.seeds):
        seed = args.seed + i
        source = base if i == 0 else f"{base.rstrip('/')}-seed{seed}"
        code, model_id = _one(args, source, seed, args.reports_dir if i == 0 else None)
        codes.append(code)
        model_ids.append(model_id)
    if args.seeds > 1:
        from dormant_tasks.findings import seed_group_findings, series_findings
        from dormant_tasks.reporting import seed_group_lines

        from .findings import plain_text

        group = seed_group_findings([series_findings(args.store, m) for m in model_ids])
        print()
        print("\n".join(map(plain_text, seed_group_lines(group, esc=str))))
    return max(codes)


def _one(args: argparse.Namespace, source: str, seed: int, reports_dir: str | None) -> tuple[int, str]:
    """One seed's series: pretrained (once), tracked, reported; (exit code, its series' name)."""
    from dormant_tasks.run import answer_from_store
    from dormant_tasks.tiny import is_complete
    from dormant_tasks.tracking import TrackRequest
    from flows.demo import demo

    from .track import check_reports_dir, exit_code, print_summary

    started = getattr(args, "started", None) or time.monotonic()  # the command's start: the wall time waited
    request = TrackRequest(
        source=source,
        store=args.store,
        limit=args.limit,
        calibrations=tuple(args.calibration or DEMO_CALIBRATION),
        reports_dir=reports_dir,
        series_name=args.series_name,
    )
    request.calibration_sets  # noqa: B018 (an unknown set is refused here, before minutes of pretraining)
    check_reports_dir(request)  # before the pretraining
    done = answer_from_store(request) if is_complete(request.source, args.steps, seed) else None
    if done is not None:
        print_summary(done, warnings=False)  # the run that stored the series showed them
        print(
            f"demo: the series and its store are complete ({time.monotonic() - started:.0f} s); "
            f"`make clean-demo` starts over"
        )
        return 0, request.model_id
    from flows.session import start_prefect

    start_prefect()
    result = demo(request, steps=args.steps, seed=seed, threads=args.threads)
    print()
    print_summary(result)
    print(
        f"demo finished in {time.monotonic() - started:.0f} s; "
        f"`dormant status --store {args.store}` summarises the store, `dormant report` re-renders the report"
    )
    return exit_code(result), request.model_id


def interrupted(args: argparse.Namespace) -> str:
    from dormant_tasks.run import stored_note
    from dormant_tasks.tracking import TrackRequest
    from flows.demo import DEMO_SERIES

    calibrations = tuple(args.calibration or DEMO_CALIBRATION)
    source = str(args.model or DEMO_SERIES)
    return stored_note(
        TrackRequest(source=source, store=args.store, calibrations=calibrations, series_name=args.series_name)
    )
