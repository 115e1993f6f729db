"""`dormant deploy`: register the track flow with one request as a Prefect work-pool deployment (needs a server).

The options are `track`'s and build the same validated request, stored as the deployment's parameters; a worker
runs it: on the worker's host the series (a Hub id, or a folder at the same path), the store and --device must
exist, since the flow runs there. With a Prefect server running (`prefect server start`, then
`export PREFECT_API_URL=http://127.0.0.1:4200/api`):

    dormant deploy --model allenai/OLMo-2-0425-1B --max 50 --pool gpu --cron "0 3 * * *"
    prefect worker start --pool gpu                 # on the host that runs it; `--run-once` to take one run
    prefect deployment run track-deployment/track-allenai-OLMo-2-0425-1B   # a run now, besides the schedule

A missing pool is created as a `process` pool: its runs start as processes of the worker, in the worker's
environment (dormant-heads installed there). A docker or kubernetes pool runs each in a container: --image names
one with dormant-heads installed (docs/CLUSTER.md). Deploying the same name again updates the deployment. One
machine and no worker: `dormant serve`.
"""

from __future__ import annotations

import argparse

from dormant_tasks.options import Option

from .options import add_options
from .track import add_track_arguments, check_reports_dir, request_from_args

DEPLOYMENT = (
    Option(
        "--pool",
        "the work pool whose workers run it (created as a `process` pool when missing; required)",
        "deployment",
        {"required": True, "metavar": "NAME"},
    ),
    Option(
        "--cron",
        'cron schedule, e.g. "0 3 * * *" (03:00 daily; default: runs on demand)',
        "deployment",
        {"metavar": "CRON"},
    ),
    Option("--name", "deployment name (default: track-<model>)", "deployment", {"metavar": "NAME"}),
    Option(
        "--image",
        "the image of a docker or kubernetes pool's runs (dormant-heads installed)",
        "deployment",
        {"metavar": "IMAGE"},
    ),
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "deploy",
        help="deploy the track flow to a Prefect work pool (a worker runs it; optional cron schedule)",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    add_track_arguments(parser)
    add_options(parser, DEPLOYMENT)
    # --device names the worker's device: it is not looked for on this host (`preflight`)
    parser.set_defaults(func=run, device_elsewhere=True)


def run(args: argparse.Namespace) -> int:
    from dormant_tasks.errors import ConfigError
    from dormant_tasks.names import series_slug
    from flows.deployments import check_cron, deploy

    from .preflight import api_url

    if args.cron is not None:
        check_cron(args.cron)
    if not args.pool.strip():
        raise ConfigError("--pool is empty: name a work pool (e.g. --pool dormant)")
    url = api_url()  # a server that keeps running, and answers: asked first, before the libraries load (seconds)
    request = request_from_args(args)
    series_slug(request.model_id)  # a name the store cannot keep is refused before anything is registered
    request.calibration_sets  # noqa: B018 (an unknown set, an empty or non-UTF-8 file: here, not on the worker)
    check_reports_dir(request)
    deployed = deploy(request, args.pool, args.cron, args.name, args.image)
    pool_note = " (created: a process pool)" if deployed.pool_created else ""
    print(f"deployment: {deployed.name} ({deployed.id}) at {url}")
    print(
        f"work pool: {deployed.pool}{pool_note}; its runs start when a worker polls it: prefect worker start --pool {deployed.pool}"
    )
    when = f'on schedule "{args.cron}" and ' if args.cron else ""
    print(f"runs: {when}on demand: prefect deployment run {deployed.name}")
    return 0
