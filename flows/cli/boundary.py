"""The one error boundary of `dormant`: every subcommand runs through `run_command`.

- an expected failure (any `DormantError`, raised before or inside a Prefect run, and the OS errors a
  user causes: disk full, read-only or unwritable folder, a file where a folder should be) prints ONE
  line `dormant CMD: error: ...` on stderr and exits 2; `--debug` adds its traceback;
- an unexpected exception keeps its traceback (exit 1);
- SIGINT and SIGTERM stop the run: the temporary Prefect server is stopped, one line says what is stored
  (`interrupted: N checkpoints stored, rerun to continue`), exit 130. Every finished checkpoint is stored
  once and nothing partial is left: the store's writes are atomic, as after a kill.

Whichever way a command ends, the temporary Prefect server is stopped here (`flows.session.stop_prefect`), and
what its shutdown logs never reaches the console (`--verbose` and `--debug` show it).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback

from dormant_tasks.errors import USER_ERRNOS, DormantError


def run_command(args: argparse.Namespace) -> int:
    from flows.session import is_interrupt, stop_prefect

    signal.signal(signal.SIGTERM, _interrupt)  # `kill`, a scheduler's stop, a container's stop: like Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on Ctrl-C stops the command and says so
    debug = getattr(args, "debug", False) or os.environ.get("DORMANT_DEBUG") == "1"
    try:
        from .preflight import preflight

        preflight(args)  # the cheap checks (device, store folder, model folder) before any heavy import
        code = args.func(args) or 0
        stop_prefect()  # now rather than at exit: its shutdown stays off the console, as after a failure
        return code
    except DormantError as e:
        return _fail(args, str(e), debug)
    except OSError as e:
        if e.errno not in USER_ERRNOS:
            raise
        where = f" ({e.filename})" if e.filename else ""
        return _fail(args, f"{e.strerror or e}{where}: free space, fix the permissions or choose another folder", debug)
    except BaseException as e:
        if not is_interrupt(e):
            raise
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the clean-up
        stop_prefect()
        print(f"dormant {args.command}: {_interrupted_note(args)}", file=sys.stderr)
        return 130


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _fail(args, message: str, debug: bool) -> int:
    from flows.session import stop_prefect

    stop_prefect()
    if debug:
        traceback.print_exc()
    print(f"dormant {args.command}: error: {message}", file=sys.stderr)
    return 2


def _interrupted_note(args) -> str:
    """What the interrupted command left: its module's `interrupted(args)` when it has one."""
    module = importlib.import_module(f"flows.cli.{args.command.replace('-', '_')}")
    note = getattr(module, "interrupted", None)
    try:
        return note(args) if note else "interrupted; rerun to continue"
    except Exception:  # the note is a courtesy: never mask the interrupt with a second failure
        return "interrupted; rerun to continue"
