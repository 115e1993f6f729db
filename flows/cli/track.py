"""`dormant track`: score every selected checkpoint of a series, store dormancy masks and transitions."""

from __future__ import annotations

import argparse
from pathlib import Path

from dormant_tasks.store import DEFAULT_STORE

from .checkpoints import add_selection_arguments, selection_from_args


def add_track_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a track run; shared with `dormant serve`."""
    parser.add_argument("--repo", required=True, metavar="REPO_OR_DIR",
                        help="Hub repo id (e.g. allenai/OLMo-2-0425-1B) or a folder of checkpoint folders")
    parser.add_argument("--store", default=str(DEFAULT_STORE), help="Parquet store folder (default: %(default)s)")
    add_selection_arguments(parser)
    g = parser.add_argument_group("scoring")
    g.add_argument("--scores", nargs="+", metavar="FN", help="score functions (default: all 16)")
    g.add_argument("--tau", action="append", default=[], metavar="FN=VALUE|FN=qQ", dest="taus",
                   help="fix a tau: a value (ahon_ln=0.4) or a quantile of the last checkpoint (ahon=q0.15)")
    g.add_argument("--retau", action="store_true",
                   help="replace the series' stored taus (re-aggregates from kept per-input scores, else rescores)")
    g.add_argument("--texts", metavar="FILE", help="calibration texts, one per line (default: WinoGrande dev)")
    g.add_argument("--limit", type=int, metavar="N", help="first N calibration texts (default: 128)")
    g.add_argument("--batch-size", type=int, default=8)
    g.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    g.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    g.add_argument("--seed", type=int, default=0, help="seed of the random baseline")
    g.add_argument("--input-scores", action=argparse.BooleanOptionalAction, default=None,
                   help="keep per-input scores (default: when they are small)")
    g = parser.add_argument_group("checkpoints on disk")
    g.add_argument("--cache-dir", help="Hugging Face cache folder for downloads (default: HF_HUB_CACHE)")
    g.add_argument("--keep-checkpoints", action="store_true", help="keep downloaded revisions after scoring")
    g = parser.add_argument_group("execution")
    g.add_argument("--runner", default="local", choices=["local", "dask"])
    g.add_argument("--address", help="scheduler address of an existing Dask cluster (default: a local cluster)")
    g.add_argument("--workers", type=int, default=2, help="workers of a local Dask cluster (default: %(default)s)")
    g.add_argument("--no-report", action="store_true", help="do not render the report at the end")
    g.add_argument("--reports-dir", metavar="DIR", help="where the report goes (default: reports/<series>/)")


def flow_parameters(args: argparse.Namespace) -> dict:
    """The track flow's parameters from parsed options (validated by the library before anything runs)."""
    sel = selection_from_args(args)
    return dict(source=args.repo, store=args.store, revisions=sel.revisions_glob,
                steps=None if sel.steps is None else f"{sel.steps[0] or ''}:{sel.steps[1] or ''}",
                every=sel.every, max_n=sel.max_n, include_main=args.include_main, scores=args.scores,
                taus=tuple(args.taus), texts=args.texts, limit=args.limit, dtype=args.dtype, device=args.device,
                batch_size=args.batch_size, seed=args.seed, cache_dir=args.cache_dir,
                keep_checkpoints=args.keep_checkpoints, input_scores=args.input_scores, retau=args.retau,
                parallel=args.runner == "dask", report=not args.no_report, reports_dir=args.reports_dir)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("track", help="track dormant heads through a series of checkpoints",
                                   description=__doc__.splitlines()[0])
    add_track_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.masks import parse_tau_option
    from dormant_tasks.score_functions import parse_score_functions

    parse_score_functions(args.scores)  # fail fast, before Prefect starts
    for t in args.taus:
        parse_tau_option(t)
    params = flow_parameters(args)
    if answer_from_store(args, params):
        return 0
    from flows.runners import task_runner
    from flows.track import track

    runner = task_runner(args.runner, args.address, args.workers, args.device)
    summary = track.with_options(task_runner=runner)(**params, progress=True)
    print_summary(summary)
    return 0


def answer_from_store(args, params: dict) -> bool:
    """A rerun on a fully stored series answers from the store, without loading a model or starting Prefect."""
    from dormant_tasks.checkpoints import list_revisions
    from dormant_tasks.tracker import TrackConfig, pending_revisions

    if not (Path(args.store) / "_store.json").is_file():
        return False
    keys = ("source", "store", "scores", "taus", "texts", "limit", "dtype", "device", "batch_size", "seed",
            "cache_dir", "keep_checkpoints", "input_scores", "retau")
    cfg = TrackConfig.build(**{k: params[k] for k in keys})
    selected = selection_from_args(args).apply(list_revisions(args.repo, include_main=args.include_main).revisions)
    pending = pending_revisions(cfg, selected)
    if pending is None or pending:
        return False
    report = None
    if params["report"]:
        from dormant_tasks.report import render_report

        report = render_report(args.store, cfg.model_id, params["reports_dir"]).index_html
    print_summary({"store": str(Path(args.store).resolve()), "model_id": cfg.model_id, "analysed": 0,
                   "skipped": len(selected), "report": report})
    return True


def print_summary(summary: dict) -> None:
    from flows.cli.status import series_line

    print(f"store: {summary['store']}")
    print(f"{summary['model_id']}: {summary['analysed']} checkpoints analysed, {summary['skipped']} already stored")
    print(series_line(summary["store"], summary["model_id"]))
    if summary.get("report"):
        print(f"report: {summary['report']}")
