"""Scheduled tracking: the track flow served as a Prefect deployment with a cron schedule.

`dormant serve --model allenai/OLMo-2-0425-1B --cron "0 3 * * *"` runs a process that polls the Prefect
API (start one with `prefect server start`, then `export PREFECT_API_URL=http://127.0.0.1:4200/api`)
and runs `track` on schedule; each run only analyses the checkpoints that are new since the last one.
"""

from __future__ import annotations

from dormant_tasks.errors import ConfigError
from dormant_tasks.tracking import TrackRequest

from .track import track


def deployment_name(model_id: str) -> str:
    return "track-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in model_id)


def build_deployment(request: TrackRequest, cron: str, name: str | None = None):
    """A `RunnerDeployment` of the track flow with the request (as JSON) on a cron schedule (not yet applied
    or served). Every scheduled run gets the same request, so its rows carry the same request_id."""
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
    return track.to_deployment(
        name=name or deployment_name(request.model_id),
        cron=cron,
        parameters={"request": request.to_dict()},
        description=track.description,
        tags=["dormant-heads"],
    )


def serve(request: TrackRequest, cron: str, name: str | None = None) -> None:
    from prefect import serve as prefect_serve

    prefect_serve(build_deployment(request, cron, name))
