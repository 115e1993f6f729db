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
from tests.builders.cli import HEAVY, in_one_process

REPO = Path(__file__).resolve().parents[3]


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(argv, parser) of `dormant` and of every subcommand, sub-subcommands included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


COMMANDS = list(commands(build_parser()))
IDS = [" ".join(path) or "dormant" for path, _ in COMMANDS]


def test_help_imports_no_heavy_library():
    """Every command's `--help`, one after another in one fresh process (`in_one_process`): a `--help` that imports
    nothing heavy leaves the process as clean as a fresh one for the next, so each is checked as if alone."""
    results = in_one_process([([*path, "--help"], REPO, None) for path, _ in COMMANDS])
    assert {i: (r.code, r.stderr) for i, r in zip(IDS, results, strict=True) if r.code != 0} == {}
    assert all(r.stdout.startswith("usage: dormant") for r in results)
    heavy = {i: sorted(r.imported & HEAVY) for i, r in zip(IDS, results, strict=True) if r.imported & HEAVY}
    assert heavy == {}, f"`--help` imports a heavy library: {heavy}"


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


@pytest.mark.parametrize("path,parser", COMMANDS[1:], ids=IDS[1:])
def test_every_command_takes_the_global_flags(path, parser):
    """`--debug` (read by `boundary.run_command` as `args.debug`) and `--verbose` on every subcommand."""
    args = build_parser().parse_args([*path, *_required(parser), "--debug", "--verbose"])
    assert args.debug is True and args.verbose is True
    args = build_parser().parse_args([*path, *_required(parser)])
    assert getattr(args, "debug", False) is False and getattr(args, "verbose", False) is False


def _required(parser: argparse.ArgumentParser) -> list[str]:
    """Placeholder values of a leaf command's required options (a command with subcommands: none, it is not a leaf)."""
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        pytest.skip("a command with subcommands: its flags are checked on each of them")
    return [arg for a in parser._actions if a.required and a.option_strings for arg in (a.option_strings[-1], "x")]


def test_version_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "--version"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"dormant-heads {__version__}\n"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"dormant-heads {__version__}\n"


def test_tiny_steps_default_matches_the_library():
    from dormant_tasks.tiny import DEFAULT_STEPS
    from flows.cli.pretrain_tiny import DEFAULT_STEPS as CLI_STEPS

    assert CLI_STEPS == DEFAULT_STEPS
