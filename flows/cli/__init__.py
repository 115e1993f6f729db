"""The `dormant` command line. Each subcommand is a small module with `add_parser(subparsers)`.

`boundary.run_command` runs the chosen subcommand inside the one error boundary: an expected failure is one
line on stderr and exit code 2, an interrupt exit code 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules of this package, in the order `--help` lists them.
COMMANDS = ["demo", "track", "serve", "status", "report", "evaluate", "checkpoints", "score", "pretrain_tiny", "store"]


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
    return parser


def main(argv: list[str] | None = None) -> int:
    from flows.session import configure_console

    from .boundary import run_command

    args = sys.argv[1:] if argv is None else argv
    configure_console(verbose="--verbose" in args)  # before any library is imported: it reads the settings once
    return run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
