"""The `dormant` command line. Each subcommand is a small module with `add_parser(subparsers)`.

`options` holds the grammar (one name per concept, shared option definitions, one-line parse errors);
`boundary.run_command` runs the chosen subcommand inside the one error boundary: an expected failure is one
line on stderr and exit code 2, an interrupt exit code 130.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

# Subcommand modules of this package, in the order `--help` lists them.
COMMANDS = [
    "demo",
    "track",
    "serve",
    "deploy",
    "status",
    "report",
    "findings",
    "reproduce",
    "compare",
    "publish",
    "evaluate",
    "leaderboard",
    "checkpoints",
    "score",
    "pretrain_tiny",
    "store",
]


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand; light: no torch, pyarrow or prefect is imported to build it."""
    from dormant_tasks import __version__

    from .options import DormantParser, add_global_flags

    parser = DormantParser(
        prog="dormant",
        description="Track dormant (inactive) attention heads through a language model's pretraining.",
    )
    parser.add_argument("--version", action="version", version=f"dormant-heads {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(sub)
    add_global_flags(parser)  # anywhere on the line: before the command, after it, or in between
    return parser


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()  # what the command's reported times count from: the wall time the user waits
    args = sys.argv[1:] if argv is None else argv
    with contextlib.ExitStack() as stack:
        if argv is None:
            utf8_everywhere()
            signal.signal(signal.SIGINT, _interrupted_early)  # until `run_command` takes over: nothing has started
            no_stdin()
            if not {"-h", "--help", "--version"} & set(args):
                from dormant_tasks.progress import first_line

                # a line within about a second, whatever the command waits for before its own (imports, the server)
                stack.enter_context(first_line(next((a for a in args if not a.startswith("-")), ""), started))
        code = _run(argv, args, started)
        if code == 130 and argv is None:  # an interrupted program (not a call from Python): leave now
            # The server is stopped, the run's logs flushed, the note printed and every write atomic; the
            # interpreter's finalization of torch, transformers and prefect alone took seconds on a loaded machine.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return code


def _run(argv: list[str] | None, args: list[str], started: float) -> int:
    from flows.session import configure_console

    from .boundary import run_command

    verbose = "--verbose" in args
    if not verbose and not sys.stderr.isatty():
        plain_diagnostics()
    # before any library is imported: it reads the settings once
    configure_console(verbose=verbose, debug="--debug" in args)
    parsed = build_parser().parse_args(argv)
    parsed.started = started
    return run_command(parsed)


def utf8_everywhere() -> None:
    """Under a locale that is not UTF-8 (`LC_ALL=C` with `PYTHONCOERCECLOCALE=0` and `PYTHONUTF8=0`), Python decodes
    a non-ASCII path into surrogates that pyarrow cannot encode (a traceback from the first store read) and writes
    messages in ASCII: the program starts again at once in Python's UTF-8 mode, which its children inherit, so paths
    and messages are the same under every locale. Nothing has run yet."""
    if sys.getfilesystemencoding().lower().replace("-", "") == "utf8" or os.environ.get("PYTHONUTF8") == "1":
        return  # a UTF-8 locale, or UTF-8 mode already
    os.environ["PYTHONUTF8"] = "1"
    os.execv(sys.executable, sys.orig_argv)


def _interrupted_early(signum, frame) -> None:
    """Ctrl-C while the command line is parsed and the libraries configured: one line, not the traceback of
    whichever import it landed in; nothing has run, so nothing needs stopping."""
    os.write(2, b"dormant: interrupted before the command started; nothing was done\n")
    os._exit(130)


def no_stdin() -> None:
    """No command reads stdin: the program's (and its children's) stdin becomes /dev/null, so a library's prompt
    (transformers' `[y/N]` before running a checkpoint's own code) gets end-of-file, never a `y` from a pipe."""
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)


def plain_diagnostics() -> None:
    """On a pipe or in a log file, diagnostics are plain lines: Prefect's console records as `WARNING: message`
    (no clock, no `Task run 'x'` column) and no progress bar of a library that does not ask tqdm for one
    explicitly (lm-eval's, transformers'): tqdm reads `TQDM_DISABLE` as the default of `disable` when it is first
    imported, which `main` runs before (a bar that passes `disable=` itself keeps its own choice). The variable
    also reaches the children (the temporary server, the tiny pretraining run), whose stderr is the same pipe."""
    for key in ("FORMAT", "FLOW_RUN_FMT", "TASK_RUN_FMT"):
        os.environ.setdefault(f"PREFECT_LOGGING_FORMATTERS_STANDARD_{key}", "%(levelname)s: %(message)s")
    os.environ.setdefault("TQDM_DISABLE", "1")


if __name__ == "__main__":
    sys.exit(main())
