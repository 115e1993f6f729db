"""`dormant track`: score every selected checkpoint of a series, store dormancy masks and transitions.

The options build one `TrackRequest` (validated once, conflicting flags refused); the flow receives it
whole and saves it beside the results (`<store>/requests/...`); `--request FILE` runs a saved one again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dormant_tasks.store.input_scores import INPUT_SCORES_AUTO_LIMIT, InputScoresPolicy
from dormant_tasks.tracking.calibration import bundled_set_names

from .checkpoints import add_selection_arguments, add_tokens_per_step_argument, selection_from_args
from .options import add_calibration_arguments, add_device_argument, add_dtype_argument, add_store_argument

CALIBRATION_SETS = bundled_set_names()
INPUT_SCORES_NOTE = {
    "auto": f"kept while a checkpoint has at most {INPUT_SCORES_AUTO_LIMIT:,} values; `dormant store gc` drops them",
    "keep": "kept; `dormant store gc` drops them",
    "drop": "not kept: a later --retau loads the models again",
}


def add_track_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a track run; shared with `dormant serve`."""
    parser.add_argument(
        "--repo",
        metavar="REPO_OR_DIR",
        help="Hub repo id (e.g. allenai/OLMo-2-0425-1B) or a folder of checkpoint folders (required unless --request)",
    )
    add_store_argument(parser)
    parser.add_argument(
        "--request",
        metavar="FILE",
        help="run a saved request again (a <store>/requests/.../*.json file); no other option",
    )
    add_tokens_per_step_argument(parser)
    add_selection_arguments(parser)
    g = parser.add_argument_group("scoring")
    g.add_argument("--scores", nargs="+", metavar="FN", help="score functions (default: all 16, incl. random)")
    g.add_argument(
        "--tau",
        action="append",
        default=[],
        metavar="FN=VALUE|FN=qQ",
        dest="taus",
        help="fix a tau: a value (ahon_ln=0.4) or a quantile of the reference checkpoint (ahon=q0.15); repeatable",
    )
    g.add_argument(
        "--reference",
        metavar="REV",
        help="reference checkpoint of quantile taus (default: the last checkpoint of the whole series)",
    )
    g.add_argument(
        "--retau",
        action="store_true",
        help="replace the series' stored taus (re-aggregates from kept per-input scores, else rescores)",
    )
    add_calibration_arguments(g)
    g.add_argument(
        "--calibration",
        action="append",
        metavar="NAME",
        help="a calibration set, repeatable: a bundled set or a UTF-8 text file (one text per line); every set "
        "is scored on each loaded checkpoint and keeps its own taus, masks and transitions; the first is the "
        "series' primary set. Bundled: " + ", ".join(CALIBRATION_SETS) + " (default: winogrande)",
    )
    g.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="truncate each input to N tokens (default: the model's context length)",
    )
    g.add_argument(
        "--max-batch-tokens",
        type=int,
        metavar="N",
        help="padded tokens per batch, which bounds attention memory (default: the engine's budget)",
    )
    add_dtype_argument(g)
    add_device_argument(g, "score")
    g.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the random baseline (default: %(default)s)"
    )
    g.add_argument(
        "--input-scores",
        choices=[p.value for p in InputScoresPolicy],
        help="keep per-input scores (float32; they let --retau skip the model): auto keeps them while a "
        f"checkpoint has at most {INPUT_SCORES_AUTO_LIMIT:,} values (default: auto); "
        "`dormant store gc` drops them later",
    )
    g = parser.add_argument_group("checkpoints on disk")
    g.add_argument(
        "--cache-dir", metavar="DIR", help="Hugging Face cache folder for downloads (default: $HF_HUB_CACHE)"
    )
    g.add_argument("--keep-checkpoints", action="store_true", help="keep downloaded revisions after scoring")
    g = parser.add_argument_group("execution")
    g.add_argument(
        "--runner",
        default="local",
        choices=["local", "dask"],
        help="local: one checkpoint at a time, next download overlapped; dask: one task per "
        "checkpoint on a Dask cluster (default: %(default)s)",
    )
    g.add_argument("--address", metavar="URL", help="scheduler of an existing Dask cluster (with --runner dask)")
    g.add_argument(
        "--workers", type=int, metavar="N", help="workers of a local Dask cluster, with --runner dask (default: 2)"
    )
    g.add_argument("--no-report", action="store_true", help="do not render the report at the end")
    g.add_argument(
        "--reports-dir", metavar="DIR", help="report folder (default: <$DORMANT_REPORTS or ./reports>/<series slug>/)"
    )


# Options that a saved request replaces: given together with --request they are refused.
_REQUEST_OPTIONS = (
    "repo",
    "revisions",
    "steps",
    "every",
    "max_n",
    "include_main",
    "tokens_per_step",
    "scores",
    "taus",
    "reference",
    "retau",
    "texts",
    "calibration",
    "limit",
    "max_tokens",
    "max_batch_tokens",
    "input_scores",
    "cache_dir",
    "keep_checkpoints",
    "address",
    "workers",
    "no_report",
    "reports_dir",
)


def request_from_args(args: argparse.Namespace):
    """The run's `TrackRequest` from parsed options (ConfigError for a bad or conflicting option)."""
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.requests import TrackRequest

    if args.request:
        given = [o for o in _REQUEST_OPTIONS if getattr(args, o) not in (None, False, [], ())]
        if given:
            flag = {"max_n": "max", "taus": "tau"}.get(given[0], given[0]).replace("_", "-")
            raise ConfigError(f"--request replays a saved request (edit the JSON file to change it); drop --{flag}")
        path = Path(args.request)
        if not path.is_file():
            raise ConfigError(f"--request {args.request!r}: no such file; pass a <store>/requests/.../*.json file")
        return TrackRequest.from_json(path.read_text(encoding="utf-8"))
    if not args.repo:
        raise ConfigError("--repo is required: a Hub repo id (e.g. allenai/OLMo-2-0425-1B) or a series folder")
    return TrackRequest(
        source=args.repo,
        store=args.store,
        selection=selection_from_args(args),
        include_main=args.include_main,
        tokens_per_step=args.tokens_per_step,
        score_fns=args.scores,
        taus=tuple(args.taus),
        reference=args.reference,
        retau=args.retau,
        texts=args.texts,
        calibrations=tuple(args.calibration or ()),
        limit=args.limit,
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        max_batch_tokens=args.max_batch_tokens,
        dtype=args.dtype,
        device=args.device,
        seed=args.seed,
        input_scores=args.input_scores or "auto",
        cache_dir=args.cache_dir,
        keep_checkpoints=args.keep_checkpoints,
        runner=args.runner,
        address=args.address,
        workers=args.workers,
        report=not args.no_report,
        reports_dir=args.reports_dir,
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "track", help="track dormant heads through a series of checkpoints", description=__doc__.split("\n\n")[0]
    )
    add_track_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.store.io import check_store
    from dormant_tasks.tracking.tracker import plan_series

    request = request_from_args(args)  # validated before Prefect starts: a bad option costs nothing
    request.calibration_sets  # noqa: B018 (an unknown set, an empty or non-UTF-8 file, two equal sets: here)
    plan = plan_series(request)  # an unknown folder, repo or an empty selection fails here, as cheaply
    check_store(request.store, writable=True)
    if request.address:  # before Prefect starts: a scheduler that does not answer costs seconds, not a server start
        from flows.runners import check_scheduler

        check_scheduler(request.address)
    if answer_from_store(request, plan):
        return 0
    print_summary(run_track(request))
    return 0


def run_track(request) -> dict:
    """Run the track flow on the request's task runner; returns the flow's summary."""
    from flows.runners import task_runner
    from flows.session import start_prefect
    from flows.track import track

    start_prefect()
    return track.with_options(task_runner=task_runner(request))(request, progress=True)


def interrupted(args: argparse.Namespace) -> str:
    """The line an interrupted `track` prints (`boundary.run_command`)."""
    return stored_note(request_from_args(args))


def stored_note(request) -> str:
    from dormant_tasks.store.io import stored_checkpoint_keys

    n = len({key.revision for key in stored_checkpoint_keys(request.store, request.model_id)})
    return f"interrupted: {n} checkpoint{'s' if n != 1 else ''} of {request.model_id} stored, rerun to continue"


def answer_from_store(request, plan=None) -> bool:
    """A rerun on a fully stored series answers from the store, without loading a model or starting Prefect."""
    from dormant_tasks.store.io import is_store
    from dormant_tasks.tracking.tracker import pending_revisions, plan_series

    if not is_store(request.store):
        return False
    plan = plan or plan_series(request)
    pending = pending_revisions(request, plan)
    if pending is None or pending:
        return False
    report = None
    if request.report:
        from dormant_tasks.reporting.report import render_report

        report = render_report(request.store, request.model_id, request.reports_dir, reuse=True).index_html
    print_summary(
        {
            "store": request.store,
            "model_id": request.model_id,
            "analysed": 0,
            "skipped": len(plan.selected),
            "report": report,
        }
    )
    return True


def print_summary(summary: dict) -> None:
    from flows.cli.status import series_line

    print(f"store: {summary['store']}")
    print(f"{summary['model_id']}: {summary['analysed']} checkpoints analysed, {summary['skipped']} already stored")
    print(series_line(summary["store"], summary["model_id"]))
    if summary.get("input_scores"):
        print(
            f"per-input scores: --input-scores {summary['input_scores']} ({INPUT_SCORES_NOTE[summary['input_scores']]})"
        )
    for warning in summary.get("warnings", []):
        print(f"warning: {warning}")
    if summary.get("n_truncated"):
        print(
            f"warning: {summary['n_truncated']} calibration inputs were longer than the model's context (or "
            "--max-tokens) and were truncated to it"
        )
    if summary.get("report"):
        print(f"report: {summary['report']}")
