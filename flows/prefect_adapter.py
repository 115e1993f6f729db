"""The one place that touches Prefect's internals: its temporary API server, its log and event workers, its console.

Prefect has no public way to start its temporary server (`SubprocessASGIServer`, the instance its clients look
up) in a process session of its own, with its output elsewhere, or to flush the run's logs and events before that
server stops. So, and only here:
- `start_server`: the server's `subprocess.Popen` call gets `start_new_session`, `stdout`/`stderr` and a
  `preexec_fn`, through a stand-in for the `subprocess` name of Prefect's server module alone, for the length of
  `start()` (the rest of the process, and every other thread, keeps the real `subprocess.Popen`);
- `drain_workers`: `APILogWorker.drain_all` and `EventsWorker.drain_all` (what Prefect's own test harness calls);
- `console_handlers`: Prefect's console handlers, once its logging is configured (a filter is added through
  logging's public `addFilter`).
`check_shape()` says in one line what moved when Prefect changes any of it; `tests/flows/test_prefect_adapter.py`
checks the shape and the behaviour against the installed version.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import subprocess
from collections.abc import Iterator
from types import ModuleType
from typing import IO, Any

ADAPTER = "flows/prefect_adapter.py"


class PrefectDrift(RuntimeError):
    """The installed Prefect no longer has the internals this adapter uses."""


def _drift(what: str) -> PrefectDrift:
    import prefect

    return PrefectDrift(f"prefect {prefect.__version__}: {what}; fix {ADAPTER} for this version")


def check_shape() -> None:
    """PrefectDrift, naming the version and what moved, unless Prefect has what this adapter uses."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker, PrefectConsoleHandler
    from prefect.server.api import server as server_module

    server_cls = getattr(server_module, "SubprocessASGIServer", None)
    if server_cls is None:
        raise _drift("prefect.server.api.server has no SubprocessASGIServer")
    for name in ("start", "stop", "_run_uvicorn_command"):
        if not callable(getattr(server_cls, name, None)):
            raise _drift(f"SubprocessASGIServer has no {name}()")
    if getattr(server_module, "subprocess", None) is not subprocess:
        raise _drift("prefect.server.api.server no longer imports `subprocess` (the server's Popen)")
    try:  # where Prefect's source is installed (a bytecode-only install has none: the check is skipped there)
        source = inspect.getsource(server_cls._run_uvicorn_command)
    except (OSError, TypeError):
        source = "subprocess.Popen("
    if "subprocess.Popen(" not in source:
        raise _drift("SubprocessASGIServer._run_uvicorn_command no longer starts the server with subprocess.Popen")
    for worker in (APILogWorker, EventsWorker):
        drain = getattr(worker, "drain_all", None)
        if drain is None or "timeout" not in inspect.signature(drain).parameters:
            raise _drift(f"{worker.__name__}.drain_all(timeout=...) is gone")
    if not issubclass(PrefectConsoleHandler, logging.Handler):
        raise _drift("PrefectConsoleHandler is no logging.Handler")


class _SubprocessWith(ModuleType):
    """`subprocess` as Prefect's server module sees it while the server starts: Popen with `popen_kwargs` added."""

    def __init__(self, popen_kwargs: dict[str, Any]):
        super().__init__("subprocess")
        self._popen_kwargs = popen_kwargs

    def Popen(self, *args, **kwargs):  # noqa: N802 - the name Prefect calls
        return subprocess.Popen(*args, **{**kwargs, **self._popen_kwargs})

    def __getattr__(self, name: str):
        return getattr(subprocess, name)


@contextlib.contextmanager
def _server_popen(popen_kwargs: dict[str, Any]) -> Iterator[None]:
    from prefect.server.api import server as server_module

    server_module.subprocess = _SubprocessWith(popen_kwargs)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        server_module.subprocess = subprocess  # type: ignore[attr-defined]


def start_server(output: IO[bytes] | None, preexec_fn=None) -> Any:
    """Start Prefect's temporary API server (the instance its clients use) in a process session of its own, its
    stdout and stderr to `output` (None: inherited), `preexec_fn` run in the child; returns the server (stopped
    again when it does not start)."""
    from prefect.server.api.server import SubprocessASGIServer

    check_shape()
    server = SubprocessASGIServer()
    try:
        with _server_popen({"start_new_session": True, "stdout": output, "stderr": output, "preexec_fn": preexec_fn}):
            server.start()
    except BaseException:
        server.stop()  # one that never answered is stopped now, not at exit
        raise
    return server


def server_pid(server) -> int | None:
    """The process id of a started server (None once stopped)."""
    process = server_process(server)
    return None if process is None else process.pid


def server_process(server) -> Any:
    """The `subprocess.Popen` of a started server (None once stopped): Prefect keeps it as `server_process`."""
    return getattr(server, "server_process", None)


def drain_workers(timeout_s: float) -> None:
    """Send the run's queued logs and events to the API, waiting at most `timeout_s` for each worker."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):  # a worker that never started has nothing to flush
            worker.drain_all(timeout=timeout_s)


def console_handlers() -> list[logging.Handler]:
    """Prefect's console handlers, each once, after Prefect has configured its logging."""
    import prefect  # noqa: F401  (configures logging on import)
    from prefect.logging.configuration import setup_logging  # noqa: F401
    from prefect.logging.handlers import PrefectConsoleHandler

    found: dict[int, logging.Handler] = {}
    for logger in [logging.getLogger(), *(logging.getLogger(n) for n in logging.root.manager.loggerDict)]:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, PrefectConsoleHandler):
                found.setdefault(id(handler), handler)
    return list(found.values())
