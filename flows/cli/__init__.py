"""The `dormant` command line. Each subcommand is a small module with `add_parser(subparsers)`.

Any `DormantError` becomes a one-line message on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from dormant_tasks.errors import DormantError

# Subcommand modules of this package, in the order `--help` lists them.
COMMANDS = ["demo", "track", "serve", "status", "report", "evaluate", "checkpoints", "score", "pretrain_tiny", "store"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dormant",
        description="Track dormant (inactive) attention heads through a language model's pretraining.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(sub)
    return parser


def _prefect_defaults() -> None:
    """Before prefect is imported: no telemetry (often no network), and time for the temporary server's
    first start (20-75 s on a fresh machine) when no PREFECT_API_URL points at a running server."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


def main(argv: list[str] | None = None) -> int:
    _prefect_defaults()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except DormantError as e:
        print(f"dormant {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"dormant {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
