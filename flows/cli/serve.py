"""`dormant serve`: run `track` on a cron schedule as a Prefect deployment (needs a Prefect server).

Start a server once with `prefect server start` and `export PREFECT_API_URL=http://127.0.0.1:4200/api`;
then `dormant serve --model allenai/OLMo-2-0425-1B --max 50 --cron "0 3 * * *"` serves the deployment
until interrupted. Each scheduled run analyses only checkpoints not yet in the store. Without a server
that answers it is refused in one line: a temporary one would end with the command, and the schedule
and its runs' history with it.
"""

from __future__ import annotations

import argparse

from dormant_tasks.options import Option

from .options import add_options
from .track import add_track_arguments, request_from_args


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve the track flow on a cron schedule (Prefect deployment)",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    add_track_arguments(parser)
    add_options(
        parser,
        [
            Option(
                "--cron",
                'cron schedule, e.g. "0 3 * * *" (03:00 daily; required)',
                kw={"required": True, "metavar": "CRON"},
            ),
            Option("--name", "deployment name (default: track-<model>)", kw={"metavar": "NAME"}),
        ],
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flows.deployments import build_deployment, serve

    from .preflight import api_url

    api_url("a schedule")  # a server that keeps running, and answers: asked first (seconds)
    request = request_from_args(args)
    build_deployment(request, args.cron, args.name)  # validates the schedule before serving
    serve(request, args.cron, args.name)
    return 0


def interrupted(args: argparse.Namespace) -> str:
    """The one line of a Ctrl-C: Prefect's `serve` pauses the deployment's schedule as it stops."""
    return "stopped; the schedule is paused on the Prefect server until `dormant serve` runs again"
