"""Prefect for one `dormant` command: its API, its console, and what Ctrl-C does to it.

Without `PREFECT_API_URL`, `start_prefect` starts Prefect's temporary API server (`prefect_adapter.start_server`)
in a process session of its own, so Ctrl-C reaches only the `dormant` process, which stops its run, reports it and
stops the server on the way out (a `dormant` killed outright takes the server with it: `_die_with_parent`). The
server's output goes to a private file (shown with `--verbose`/`--debug`, and when it does not start): its
shutdown can log a timing-dependent traceback. The console shows warnings and errors only (`--verbose`: every run
log line); a `DormantError` or an interrupt is the CLI's one line, not Prefect's traceback too.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from typing import IO, Any

from dormant_tasks.progress import early
from flows import prefect_adapter

_started = False
_server: Any = None  # the temporary server this process started (None: PREFECT_API_URL names one, or none yet)
_show_library_output = False  # --verbose or --debug: the server's own output and shutdown records are shown
_stopping = False  # set by stop_prefect once the run's logs are flushed: the console drops library records
_server_output: IO[bytes] | None = None  # the temporary server's stdout and stderr (None: the terminal's)


def configure_console(verbose: bool, debug: bool = False) -> None:
    """Before prefect is imported: telemetry off, the console at WARNING (INFO with --verbose)."""
    global _show_library_output
    _show_library_output = verbose or debug or os.environ.get("DORMANT_DEBUG") == "1"
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
    global _server, _server_output
    _server_output = None if _show_library_output else tempfile.TemporaryFile()
    try:
        with early("dormant: starting the temporary Prefect server (seconds, once per command)"):
            _server = prefect_adapter.start_server(_server_output, preexec_fn=_die_with_parent())
        _watch_server(_server)
    except Exception as e:
        if _server_output is not None:
            _server_output.seek(0)
            tail = _server_output.read()[-4000:].decode(errors="replace").strip()
            if tail:
                e.add_note(f"the temporary Prefect server's output:\n{tail}")
        raise


def _watch_server(server: Any) -> None:
    """End this process, in one line, when the temporary server stops during the run by no doing of ours: a
    SIGTERM to every process at once (`pkill`, a control group's stop) reaches the server too, and Prefect's
    crash handling then retried the dead server for 80 s before the run could stop. Nothing is lost by leaving
    at once: every store write is atomic and a killed writer's temp files are swept by the next run."""
    import atexit
    import threading

    process = prefect_adapter.server_process(server)
    if process is None:
        return

    def watch() -> None:
        process.wait()
        if _stopping or _server is not server:  # stopped by stop_prefect, or at exit
            return
        os.write(
            2,
            b"dormant: interrupted: the temporary Prefect server was stopped (a SIGTERM to every process, or "
            b"killed); what is stored is kept, rerun to continue\n",
        )
        os._exit(130)

    atexit.register(_stopped_at_exit)  # after the server's own atexit, so run before it (LIFO)
    threading.Thread(target=watch, name="dormant-server-watch", daemon=True).start()


def _stopped_at_exit() -> None:
    global _stopping
    _stopping = True


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> Callable[[], None] | None:
    """The server's preexec: on Linux, the kernel sends it SIGTERM when this process dies, however it dies (a
    SIGKILL runs no handler and no atexit, and the server's own session keeps it out of the terminal's signals),
    so a killed `dormant` leaves no server behind. prctl(PR_SET_PDEATHSIG) costs no extra process and no polling,
    unlike a watchdog; it fires when the thread that started the child ends, and that is the main thread here.
    Elsewhere None: the server is stopped at exit as before."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def stop_prefect() -> None:
    """Flush the run's logs and events, then stop the temporary server (it is also stopped at exit), so an
    interrupted or failed run exits promptly instead of retrying a server that is gone."""
    global _stopping, _server
    if not _started:
        return
    prefect_adapter.drain_workers(timeout_s=3)
    _stopping = True  # the run's records are out; what the shutdown logs is no business of the user's
    if _server is not None:
        _server.stop()
        _server = None


def is_interrupt(e: BaseException | None) -> bool:
    """Ctrl-C, or SIGTERM (ours, or Prefect's `TerminationSignal` while a flow run holds the handler), or an
    error raised while one was being handled: a Ctrl-C that lands while Prefect creates a task run can surface
    as its `ValueError: Task run is not set`, whose context is the KeyboardInterrupt."""
    terminated = sys.modules.get("prefect.exceptions")
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt) or (terminated is not None and isinstance(e, terminated.TerminationSignal)):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


class _ExpectedFailureFilter(logging.Filter):
    """Drops Prefect's console records of a DormantError or an interrupt: the CLI reports them in one line.
    Once the server is being stopped, drops every record (unless --verbose or --debug)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from dormant_tasks.errors import DormantError

        if _stopping and not _show_library_output:
            return False

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, DormantError) or is_interrupt(exc):
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
    for handler in prefect_adapter.console_handlers():
        handler.addFilter(_ExpectedFailureFilter())
