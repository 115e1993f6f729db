"""Prefect for one `dormant` command: its API, its console, and what Ctrl-C does to it.

Without `PREFECT_API_URL` Prefect starts a temporary API server as a child process. Left as it is, that
child shares the terminal's process group, so Ctrl-C (or `timeout -s INT`, `kill -INT -PGID`) reaches it
too: it dies first and the run then retries a dead server for minutes. `start_prefect` starts Prefect's
own temporary server (`SubprocessASGIServer`, the one Prefect's clients look up) in a process session of
its own, so a signal reaches only the `dormant` process, which stops its run, reports it to a live
server and stops the server on the way out.

The console shows warnings and errors only (`--verbose`: every run log line); a `DormantError` raised in a
task reaches the CLI's error boundary as one line, so Prefect's tracebacks of it are not printed twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial

_started = False


def configure_console(verbose: bool) -> None:
    """Before prefect is imported: telemetry off, the console at WARNING (INFO with --verbose)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if not sys.stderr.isatty():  # download and loading bars only on a terminal, not in logs and pipes
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "INFO" if verbose else "WARNING")
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_FLOW_RUNS_LEVEL", "INFO" if verbose else "WARNING")
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_TASK_RUNS_LEVEL", "INFO" if verbose else "WARNING")


def start_prefect() -> None:
    """Start the temporary API server in its own process session (once), unless PREFECT_API_URL names one,
    and keep expected failures out of Prefect's console tracebacks."""
    global _started
    if _started:
        return
    _started = True
    _filter_console()
    if os.environ.get("PREFECT_API_URL"):
        return
    from prefect.server.api.server import SubprocessASGIServer

    with _popen_in_new_session():
        SubprocessASGIServer().start()  # Prefect's clients find this instance and use it


@contextlib.contextmanager
def _popen_in_new_session() -> Iterator[None]:
    """subprocess.Popen with start_new_session=True while the server starts (the main thread alone runs)."""
    original = subprocess.Popen
    subprocess.Popen = partial(original, start_new_session=True)  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = original  # type: ignore[misc]


def stop_prefect() -> None:
    """Flush the run's logs and events, then stop the temporary server (it is also stopped at exit), so an
    interrupted or failed run exits promptly instead of retrying a server that is gone."""
    if not _started:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):  # a worker that never started has nothing to flush
            worker.drain_all(timeout=3)
    if os.environ.get("PREFECT_API_URL"):
        return
    from prefect.server.api.server import SubprocessASGIServer

    for server in list(SubprocessASGIServer._instances.values()):
        server.stop()


class _ExpectedFailureFilter(logging.Filter):
    """Drops Prefect's console records of a DormantError or an interrupt: the CLI reports them in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        from dormant_tasks.errors import DormantError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (DormantError, KeyboardInterrupt)):
            return False
        if record.levelno >= logging.ERROR:
            text = record.getMessage()
            names = {c.__name__ for c in _subclasses(DormantError)} | {"KeyboardInterrupt", "Aborted"}
            if "aborted by a" in text or any(f"{n}:" in text or f"{n}(" in text for n in names):
                return False
        return True


def _subclasses(cls) -> set[type]:
    out = {cls}
    for sub in cls.__subclasses__():
        out |= _subclasses(sub)
    return out


def _filter_console() -> None:
    import prefect  # noqa: F401
    from prefect.logging.configuration import setup_logging  # noqa: F401  (configures the handlers)
    from prefect.logging.handlers import PrefectConsoleHandler

    seen = set()
    for logger in [logging.getLogger(), *(logging.getLogger(n) for n in logging.root.manager.loggerDict)]:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, PrefectConsoleHandler) and id(handler) not in seen:
                seen.add(id(handler))
                handler.addFilter(_ExpectedFailureFilter())
