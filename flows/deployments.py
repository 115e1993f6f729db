"""The track flow as a Prefect deployment, the request as its parameters: served by this process (`dormant serve`,
polling the API and running on schedule) or registered with a work pool (`dormant deploy`; a worker runs it,
importing the flow by module path from the installed package: no image built, no code uploaded). Both need a
Prefect server that outlives the command (docs/CLUSTER.md). Both run `track_deployment`, which runs `track` on the
request's own task runner (a flow's runner is fixed where it is defined). Each run analyses only new checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prefect import flow

from dormant_tasks.errors import ConfigError

if TYPE_CHECKING:
    from dormant_tasks.tracking import TrackRequest, TrackResult


@flow(name="track-deployment", log_prints=True, validate_parameters=False)
def track_deployment(request: TrackRequest) -> TrackResult:
    """A deployment's run of `track` (a subflow) with `request` (its dict, as the API passes it) on the request's
    task runner: local threads, or its Dask cluster."""
    from dormant_tasks.tracking import TrackRequest

    from .runners import task_runner
    from .track import track

    request = TrackRequest.coerce(request)
    return track.with_options(task_runner=task_runner(request))(request)


def deployment_name(model_id: str) -> str:
    return "track-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in model_id)


def check_cron(cron: str) -> None:
    """ConfigError with pydantic's first message on one line for a string that is not a cron expression."""
    from prefect.client.schemas.schedules import construct_schedule

    try:
        construct_schedule(cron=cron)
    except Exception as e:
        errors = e.errors() if hasattr(e, "errors") else []  # pydantic's: its first message, on one line
        reason = errors[0]["msg"] if errors else str(e)
        raise ConfigError(
            f'--cron {cron!r} is not a cron expression ({" ".join(str(reason).split())}); e.g. "0 3 * * *" for '
            "03:00 daily"
        ) from None


def build_deployment(request: TrackRequest, cron: str | None, name: str | None = None, module_path: bool = False):
    """A `RunnerDeployment` of the track flow with the request (as JSON), on a cron schedule or none (not yet
    applied or served). Every scheduled run gets the same request, so its rows carry the same request_id.
    `module_path`: the flow is named `flows.deployments.track_deployment` (imported from the installed package by a
    worker) instead of by this checkout's file path."""
    from prefect.types.entrypoint import EntrypointType

    from .track import track

    if cron is not None:
        check_cron(cron)
    return track_deployment.to_deployment(
        name=name or deployment_name(request.model_id),
        cron=cron,
        parameters={"request": request.to_dict()},
        description=track.description,
        tags=["dormant-heads"],
        entrypoint_type=EntrypointType.MODULE_PATH if module_path else EntrypointType.FILE_PATH,
    )


def serve(request: TrackRequest, cron: str, name: str | None = None) -> None:
    """Serve the deployment until Ctrl-C or SIGTERM, then raise KeyboardInterrupt (the CLI's one line, exit 130).
    Prefect's `serve` swallows the interrupt and returns, and it returns for nothing else."""
    from prefect import serve as prefect_serve

    prefect_serve(build_deployment(request, cron, name))
    raise KeyboardInterrupt


@dataclass(frozen=True)
class Deployed:
    id: str
    name: str  # `track-deployment/<deployment>`, as `prefect deployment run` takes it
    pool: str
    pool_created: bool


def deploy(
    request: TrackRequest, pool: str, cron: str | None = None, name: str | None = None, image: str | None = None
) -> Deployed:
    """Register the track flow with `request` as a deployment of work pool `pool` (created as a `process` pool
    when missing); `image` (a container pool's) is the image its runs start from. Applying a deployment of the
    same name again updates it (a new request, schedule or pool)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    deployment = build_deployment(request, cron, name, module_path=True)
    created = False
    with get_client(sync_client=True) as client:
        try:
            work_pool = client.read_work_pool(pool)
        except ObjectNotFound:
            if image:  # a process pool would refuse it: nothing is created
                raise ConfigError(
                    f"--image {image}: work pool {pool} does not exist, and a missing pool is created as a process "
                    f"pool, which runs no image: create a container pool first (`prefect work-pool create {pool} "
                    "--type kubernetes`), or drop --image"
                ) from None
            work_pool = create_process_pool(client, pool)
            created = True
    container = "image" in work_pool.base_job_template.get("variables", {}).get("properties", {})
    if image and not container:
        raise ConfigError(
            f"--image {image}: work pool {pool} is a {work_pool.type} pool, whose runs start in the worker's own "
            "environment, not an image: drop --image, or name a container pool (docker, kubernetes)"
        )
    if container and not image:
        raise ConfigError(
            f"work pool {pool} is a {work_pool.type} pool: its runs start from an image, which must have "
            "dormant-heads installed: give --image (docs/CLUSTER.md builds one from the Dockerfile)"
        )
    deployment_id = deployment.apply(work_pool_name=pool, image=image)
    return Deployed(str(deployment_id), f"{track_deployment.name}/{deployment.name}", pool, created)


def create_process_pool(client, pool: str):
    """A `process` work pool named `pool`, with the process worker's own default job template."""
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    template = ProcessWorker.get_default_base_job_template()
    return client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template))
