"""`dormant track`: score every selected checkpoint of a series, store dormancy masks and transitions.

The options build one `TrackRequest` (validated once, conflicting flags refused); the flow receives it
whole and saves it beside the results (`<store>/requests/...`); `--request FILE` runs a saved one again.
"""

from __future__ import annotations

import argparse
import sys

from dormant_tasks.options import Option
from dormant_tasks.store import INPUT_SCORES_AUTO_LIMIT
from dormant_tasks.text import plural

from .options import add_options

INPUT_SCORES_NOTE = {
    "auto": f"kept while a checkpoint has at most {INPUT_SCORES_AUTO_LIMIT:,} values; `dormant store gc` drops them",
    "keep": "kept; `dormant store gc` drops them",
    "drop": "not kept: a later --retau loads the models again",
}
# `track`'s own options beside its request's (`TrackRequest`'s fields declare those)
OWN = (
    Option(
        "--request",
        "run a saved request again (a <store>/requests/.../*.json file); no other option",
        kw={"metavar": "FILE"},
    ),
    Option(
        "--no-wait",
        "when another run is writing the same series, stop at once (exit 2) instead of waiting for it",
        "execution",
        {"action": "store_true"},
    ),
)


def add_track_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a track run (its request's fields and `OWN`); shared with `dormant serve` and `deploy`."""
    from dormant_tasks.options import options_of
    from dormant_tasks.tracking import TrackRequest

    add_options(parser, [*options_of(TrackRequest), *OWN])


def request_from_args(args: argparse.Namespace):
    """The run's `TrackRequest` from parsed options (ConfigError for a bad or conflicting option)."""
    from dormant_tasks.tracking import TrackRequest

    if args.request:
        return replayed_request(args)
    names = TrackRequest.option_names()  # (the parser's others: the command's own, its bookkeeping)
    return TrackRequest.from_options(**{k: v for k, v in vars(args).items() if k in names})


def replayed_request(args: argparse.Namespace):
    """`--request FILE`: the saved request as it is. An option given with it must say what the file says (it
    may be repeated, e.g. `--store` of the same folder); any other value is refused by name: edit the file to
    change it. Run-only settings that the file holds (`--device`, `--runner`, `--batch-size` ...) are no exception;
    an option that is not part of a request (`--debug`) is not compared."""
    import dataclasses

    from dormant_tasks.errors import ConfigError
    from dormant_tasks.options import options_of
    from dormant_tasks.tracking import SELECTION_OPTIONS, TrackRequest

    saved = TrackRequest.from_file(args.request)
    declared = {o.dest: o for o in options_of(TrackRequest)}
    given = {d: _listed(getattr(args, d)) for d in sorted(getattr(args, "given", ())) if d in declared}
    if not given:
        return saved
    selection = {SELECTION_OPTIONS[d]: given[d] for d in given if d in SELECTION_OPTIONS}
    fields = TrackRequest.fields_of_options({d: v for d, v in given.items() if d not in SELECTION_OPTIONS})
    if selection:
        fields["selection"] = dataclasses.replace(saved.selection, **selection)
    flags = ", ".join(declared[d].flag for d in given)
    try:
        asked = dataclasses.replace(saved, **fields)
    except ConfigError as e:
        raise ConfigError(f"--request {args.request} with {flags}: {e}") from None

    def value(request, dest):  # the request's value of an option (a selection option: of its selection)
        if dest in SELECTION_OPTIONS:
            return getattr(request.selection, SELECTION_OPTIONS[dest])
        return getattr(request, declared[dest].field)

    differ = [d for d in given if value(asked, d) != value(saved, d)]
    if differ:
        said = value(saved, differ[0])
        said = " ".join(map(str, said)) if isinstance(said, tuple) else "unset" if said is None else said
        said = "" if isinstance(said, bool) else f" (the file's {declared[differ[0]].flag}: {said})"
        flags = ", ".join(declared[d].flag for d in differ)
        raise ConfigError(
            f"--request {args.request} replays a saved request: {flags} differ{'s' if len(differ) == 1 else ''} "
            f"from it{said}; drop {flags}, or edit the file"
        )
    return saved


def _listed(value):
    return tuple(value) if isinstance(value, list) else value


def add_parser(subparsers) -> None:
    from dormant_tasks.engine import DORMANT_RULE

    parser = subparsers.add_parser(
        "track",
        help="track dormant heads through a series of checkpoints",
        description=__doc__.split("\n\n")[0],
        epilog=DORMANT_RULE,  # the rule of the masks it stores, in its --help's one sentence
    )
    add_track_arguments(parser)
    add_options(parser, DRY_RUN_OPTIONS)
    parser.set_defaults(func=run)


class _DryRun(argparse.Action):
    """`--dry-run` reads the store, never writes it: a store that is read-only or not made yet is fine."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.dry_run, namespace.store_use = True, "optional"


DEFAULT_BANDWIDTH = "1Gbit/s"  # --dry-run's download rate when none is given


DRY_RUN = "before you download"
DRY_RUN_OPTIONS = (
    Option(
        "--dry-run",
        "list what the run would score and download (the Hub listing's sizes), the disk it needs at once and the "
        "download time, then stop: nothing downloaded, nothing written",
        DRY_RUN,
        {"nargs": 0, "action": _DryRun, "default": False},
    ),
    Option(
        "--bandwidth",
        f"--dry-run's download rate, e.g. 100MB/s or 1Gbit/s (default: {DEFAULT_BANDWIDTH})",
        DRY_RUN,
        {"metavar": "RATE"},
    ),
    Option("--format", "--dry-run's output (default: text)", DRY_RUN, {"choices": ("text", "json")}),
)


# Exit codes of `dormant track` (and `dormant demo`): 0 every selected checkpoint is stored; 2 bad input (the
# boundary's, nothing half-written); 3 the run finished but some checkpoints failed (recorded: `dormant status`
# lists them, a rerun retries them); 130 interrupted.
EXIT_CHECKPOINTS_FAILED = 3


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.names import series_slug
    from dormant_tasks.store import check_store_path

    if getattr(args, "dry_run", False) or getattr(args, "bandwidth", None) or getattr(args, "format", None):
        return run_dry(args)
    request = request_from_args(args)
    series_slug(request.model_id)  # a name the store cannot keep is refused before anything is created
    if args.request:  # the file's store and device: checked as the options' are (`preflight`)
        from dormant_tasks.devices import check_device_available

        check_store_path(request.store, "updates")
        if not request.address:
            check_device_available(request.device)
    request.calibration_sets  # noqa: B018 (an unknown set, an empty or non-UTF-8 file, two equal sets: here)
    limit_note("track", request.calibration_sets, args.limit)
    from dormant_tasks.run import run_track

    # The run (`dormant_tasks.run.run_track`) holds the series, asks its state, answers a finished rerun from the
    # store, and otherwise starts the track flow, whose task runner computes the checkpoints.
    result = run_track(
        request,
        _prefect_tasks,  # imported only when the run has work: a finished rerun answers without Prefect
        wait=not getattr(args, "no_wait", False),
        progress=True,
        note=lambda line: print(line, file=sys.stderr),
    )
    print_summary(result)
    return exit_code(result)


def _prefect_tasks(request):
    """The track flow's executor (`flows.track.PrefectTasks`), for a run with work to do."""
    from flows.track import PrefectTasks

    return PrefectTasks(request)


def run_dry(args: argparse.Namespace) -> int:
    """`--dry-run`: the series' state as the run would ask it, less every write (no lock taken, no small file kept
    in the Hub cache, no Prefect), then what it would score and download (`tracking.dry_run`)."""
    import json

    from dormant_tasks.errors import ConfigError
    from dormant_tasks.names import series_slug
    from dormant_tasks.progress import early
    from dormant_tasks.tracking import Runner, format_dry_run, parse_bandwidth, plan_dry_run, series_state

    if not args.dry_run:
        flag = "--bandwidth" if args.bandwidth else "--format"
        raise ConfigError(f"{flag} is an option of --dry-run: add --dry-run, or drop {flag}")
    bandwidth = parse_bandwidth(args.bandwidth or DEFAULT_BANDWIDTH)
    request = request_from_args(args)
    series_slug(request.model_id)
    request.calibration_sets  # noqa: B018 (the run's checks of its sets, which read the texts only)
    with early(f"dormant track: {request.model_id}: listing its checkpoints and the stored results"):
        state = series_state(request, cache=False)
    workers = None
    if request.runner is Runner.DASK and not request.address:  # a local cluster: its workers are known here
        from dormant_tasks.cluster import local_cluster_spec

        workers = local_cluster_spec(state.request)[1]["n_workers"]
    dry = plan_dry_run(state, bandwidth, state.request.budget, workers)
    if args.format == "json":
        print(json.dumps(dry.as_json(), indent=2))
    else:
        print("\n".join(format_dry_run(dry)))
    return 0


def check_reports_dir(request) -> None:
    """Before any work: the report folder is new, empty, or this store's report of this series (else one line
    naming --reports-dir; `outputs.check_folder`)."""
    if request.report:
        from dormant_tasks.outputs import check_report_folder

        check_report_folder(request.store, request.model_id, request.reports_dir)


def limit_note(command: str, sets, limit: int | None) -> None:
    """A note when `--limit` asks for more texts than a calibration set has: all of its texts are used."""
    if not limit:
        return
    for s in sets:
        if s.n_inputs < limit:
            print(
                f"dormant {command}: note: --limit {limit:,}: calibration set {s.name} has only "
                f"{plural(s.n_inputs, 'text')}; all of them are used",
                file=sys.stderr,
            )


def exit_code(result) -> int:
    return EXIT_CHECKPOINTS_FAILED if result.failed else 0


def interrupted(args: argparse.Namespace) -> str:
    """The line an interrupted `track` prints (`boundary.run_command`)."""
    from dormant_tasks.run import stored_note

    return stored_note(request_from_args(args))


def stored_tau_warnings(result) -> list[str]:
    """The tau warnings of the stored series, each naming its calibration set: the same lines as the report's
    (`tracking.tau_positions`), on a new series and on a rerun alike; the run's own when nothing is stored."""
    from dormant_tasks.tracking import SeriesView, tau_warnings_of

    if not SeriesView.exists(result.store, result.model_id):  # nothing stored (every checkpoint failed)
        return list(result.warnings)
    return tau_warnings_of(result.store, result.model_id)


def print_summary(result, warnings: bool = True) -> None:
    """The run's summary on stdout (results); its warnings and failed checkpoints on stderr (diagnostics).
    `warnings=False` (a rerun of the demo, whose first run showed them) counts the tau warnings in one line."""

    from flows.cli.status import series_line

    n_failed = len(result.failed)
    print(f"store: {result.store}")
    print(
        f"{result.model_id}: {result.analysed} checkpoints analysed, {result.skipped} already stored"
        + (f", {n_failed} failed" if n_failed else "")
    )
    print(series_line(result.store, result.model_id))
    if result.input_scores:
        print(f"per-input scores: --input-scores {result.input_scores} ({INPUT_SCORES_NOTE[result.input_scores]})")
    tau_warnings = stored_tau_warnings(result)
    for warning in tau_warnings if warnings else ():
        print(f"warning: {warning}", file=sys.stderr)
    if tau_warnings and not warnings:
        print(
            f"note: {plural(len(tau_warnings), 'tau warning')} as when the series was tracked (the report's taus "
            f"section, or `dormant track --model {result.model_id} --store {result.store}`, shows them)",
            file=sys.stderr,
        )
    for calibration_id, n in result.truncated.items():  # one line per set, named (the most cut on a checkpoint)
        print(
            f"warning: calibration set {calibration_id}: {plural(n, 'input')} longer than the model's context (or "
            "--max-tokens) truncated to it",
            file=sys.stderr,
        )
    if n_failed:  # their reasons are in the series' lines above (`dormant status` shows them too)
        names = ", ".join(revision for revision, _ in result.failed)
        print(
            f"dormant track: {n_failed} checkpoint{'s' if n_failed != 1 else ''} of {result.model_id} failed and "
            f"{'were' if n_failed != 1 else 'was'} not stored ({names}); fix the cause, then run the same `dormant "
            f"track` again to retry (stored checkpoints are skipped); exit {EXIT_CHECKPOINTS_FAILED}",
            file=sys.stderr,
        )
    if result.report:
        print(f"report: {result.report}")
