"""The `dormant` command line. Each subcommand is a small module with `add_parser(subparsers)`.

`boundary.run_command` runs the chosen subcommand inside the one error boundary: an expected failure is one
line on stderr and exit code 2, an interrupt exit code 130.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Subcommand modules of this package, in the order `--help` lists them.
COMMANDS = [
    "demo",
    "track",
    "serve",
    "status",
    "report",
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

    parser = argparse.ArgumentParser(
        prog="dormant",
        description="Track dormant (inactive) attention heads through a language model's pretraining.",
    )
    parser.add_argument("--version", action="version", version=f"dormant-heads {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(sub)
    for command in sub.choices.values():
        _add_global_flags(command)
    return parser


def _add_global_flags(parser: argparse.ArgumentParser, default=False) -> None:
    """`--debug` and `--verbose` on a subcommand and on each of its own subcommands (`store upgrade`).

    A nested parser's flags default to SUPPRESS so that `dormant store --debug upgrade` keeps the outer value.
    """
    group = parser.add_argument_group("global options")
    group.add_argument(
        "--debug", action="store_true", default=default, help="show the traceback of an error (also: $DORMANT_DEBUG=1)"
    )
    group.add_argument("--verbose", action="store_true", default=default, help="show every Prefect run log line")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                _add_global_flags(nested, default=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> int:
    from flows.session import configure_console

    from .boundary import run_command

    args = sys.argv[1:] if argv is None else argv
    # before any library is imported: it reads the settings once
    configure_console(verbose="--verbose" in args, debug="--debug" in args)
    code = run_command(build_parser().parse_args(argv))
    if code == 130 and argv is None:  # an interrupted program (not a call from Python): leave now
        # The server is stopped, the run's logs flushed, the note printed and every write atomic; the
        # interpreter's finalization of torch, transformers and prefect alone took seconds on a loaded machine.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    return code


if __name__ == "__main__":
    sys.exit(main())
