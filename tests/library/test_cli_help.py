"""`dormant --help` stays light and complete: building the parser loads no heavy library, every command has a
description, every option a help text, and `--version` names the package. (Its speed: `benchmarks/cli_help.py`.)"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from dormant_tasks import __version__
from flows.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "transformers", "pyarrow", "prefect", "numpy", "matplotlib"}


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(argv, parser) of `dormant` and of every subcommand, sub-subcommands included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


COMMANDS = list(commands(build_parser()))
IDS = [" ".join(path) or "dormant" for path, _ in COMMANDS]


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS], ids=IDS)
def test_help_imports_no_heavy_library(path):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "flows.cli", *path, "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # `import time: self [us] | cumulative | imported package`, the package indented by its nesting depth
    imported = {line.split("|")[2].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & HEAVY, f"`dormant {' '.join(path)} --help` imports {sorted(imported & HEAVY)}"


@pytest.mark.parametrize("path,parser", COMMANDS, ids=IDS)
def test_help_describes_every_command_and_option(path, parser, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: "(default: None)" cannot be wrapped apart
    assert parser.description, f"`dormant {' '.join(path)}` has no description"
    for action in parser._actions:
        if not action.option_strings:
            continue
        name = action.option_strings[-1]
        assert action.help, f"{name} of `dormant {' '.join(path)}` has no help"
        if action.required:
            assert "required" in action.help, f"{name} is required and its help does not say so"
        elif action.default not in (None, False, [], argparse.SUPPRESS):
            assert "(default: " in action.help, f"{name} has a default that its help does not show"
    assert "(default: None)" not in parser.format_help()


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"dormant-heads {__version__}\n"


def test_tiny_steps_default_matches_the_library():
    from dormant_tasks.tiny import DEFAULT_STEPS
    from flows.cli.pretrain_tiny import DEFAULT_STEPS as CLI_STEPS

    assert CLI_STEPS == DEFAULT_STEPS
