"""The parser that enforces the grammar of `dormant`, and `add_options`, which builds each command's options from
their declarations (`dormant_tasks.options.Option`: a request's fields, `dormant_tasks.grammar`'s shared options,
a command's own; one name per concept in every command, docs/USAGE.md "Command grammar").
Old spellings (`--repo`, `--series DIR`, `--task`, `--score-fn`, `--models`, `report --out`, `pretrain-tiny
--out`) keep working for one release and print one deprecation note on stderr. `--debug` and `--verbose` are
accepted anywhere on the line. Every parse error is one stderr line, `dormant CMD: error: ...`, exit 2.

`preflight` runs the cheap checks (device, store folder, model folder, one Hub probe) before any heavy import.
stdlib only here: building the parser stays light.
"""

from __future__ import annotations

import argparse
import re
import sys

from dormant_tasks.errors import ConfigError, DormantError, did_you_mean
from dormant_tasks.names import split_names
from dormant_tasks.options import Computed

# Old spelling -> current option, per command (`dormant CMD`); each is accepted for one more release.
RENAMED: dict[str, dict[str, str]] = {
    "track": {"--repo": "--model"},
    "serve": {"--repo": "--model"},
    "checkpoints": {"--repo": "--model"},
    "demo": {"--series": "--model"},
    "pretrain-tiny": {"--out": "--model"},
    "report": {"--out": "--reports-dir", "--score-fn": "--scores"},
    "evaluate": {"--task": "--tasks"},
    "leaderboard": {"--models": "--model"},
}
_noted: set[tuple[str, str]] = set()  # (command, old spelling): one note each per process


class DormantParser(argparse.ArgumentParser):
    """argparse with the grammar's rules: one-line errors, did-you-mean for a wrong flag reported by the
    subcommand itself, old spellings rewritten with a note, and a DormantError of a `type=` parser (the same
    ConfigError the request and the library raise) turned into the same one line."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        command = self.prog.removeprefix("dormant ").strip()
        renamed = RENAMED.get(command, {}) if " " in self.prog else {}
        if renamed:
            args = [self._rename(a, renamed) for a in args]
        args = self._negative_values(args)
        try:
            namespace, extras = super().parse_known_args(args, namespace)
        except DormantError as e:
            self.exit(2, f"{self.prog}: error: {e}\n")
        if extras and " " in self.prog:  # a subcommand: the wrong flag is its own to report
            self.error(self._unrecognized(extras[0]))
        if " " in self.prog:
            namespace.given = self._given(args)
        return namespace, extras

    def _negative_values(self, args: list[str]) -> list[str]:
        """`--opt -5` read as `--opt=-5` where `--opt` takes one value and the next word starts with "-" and a
        digit or "." (`--steps -5:-1`, `--bandwidth -5MB/s`, `--seed -1`): argparse takes such a word for an
        option and answers "expected one argument"; so the option's own check judges the value in either form."""
        out: list[str] = []
        words = iter(args)
        for word in words:
            action = self._option_string_actions.get(word) if word.startswith("--") else None
            if word == "--":
                return [*out, word, *words]
            if action is not None and action.nargs is None and action.option_strings:
                value = next(words, None)
                if value is not None and re.match(r"-[\d.]", value) and value not in self._option_string_actions:
                    out.append(f"{word}={value}")
                    continue
                out += [word] if value is None else [word, value]
                continue
            out.append(word)
        return out

    def _given(self, args: list[str]) -> frozenset[str]:
        """The dests of the options spelled on the line (a default is not given; `--request` conflicts with the
        given ones only). An abbreviation counts as its option, as argparse reads it."""
        flags = [s for s in self._option_string_actions if s.startswith("--")]
        given = set()
        for arg in args:
            flag = arg.partition("=")[0]
            if arg == "--":
                break
            if not flag.startswith("--"):
                continue
            matches = [flag] if flag in self._option_string_actions else [f for f in flags if f.startswith(flag)]
            if len(matches) == 1:
                given.add(self._option_string_actions[matches[0]].dest)
        return frozenset(given)

    def _rename(self, arg: str, renamed: dict[str, str]) -> str:
        flag, eq, value = arg.partition("=")
        if flag not in renamed:
            return arg
        new = renamed[flag]
        if (self.prog, flag) not in _noted:
            _noted.add((self.prog, flag))
            print(
                f"{self.prog}: note: {flag} is now {new} (the old spelling goes in the next release)", file=sys.stderr
            )
        return new + eq + value

    def _unrecognized(self, arg: str) -> str:
        flag = arg.partition("=")[0]
        if not flag.startswith("-"):
            return f"unexpected argument {arg!r}: every value follows its option (--model X, --store DIR ...)"
        renamed = RENAMED.get(self.prog.removeprefix("dormant ").strip(), {})
        names = [s for s in self._option_string_actions if s.startswith("--")] + list(renamed)
        hint = did_you_mean(flag, names)
        for old, new in renamed.items():  # a near-miss of an old spelling points at the current name
            hint = hint.replace(f'"{old}"', f'"{new}"')
        return f"unknown option {flag}{hint}"

    def error(self, message: str):
        m = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
        if m:  # argparse's list, with the closest choice first
            choices = [c.strip().strip("'") for c in m.group(2).split(",")]
            message = (
                message[: m.start()]
                + f"{m.group(1)!r}{did_you_mean(m.group(1), choices)} is not one of "
                + (", ".join(choices))
            )
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


class ListOption(argparse.Action):
    """`--tasks a b`, `--tasks a,b` and `--tasks a --tasks b` all give [a, b] (order kept, duplicates dropped)."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs.setdefault("nargs", "+")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, self.dest, None)
        items = list(given) if given is not None and given is not self.default else []
        items += split_names(values)
        if not items:
            raise ConfigError(f"{option_string} is empty: name at least one")
        setattr(namespace, self.dest, list(dict.fromkeys(items)))


def add_options(parser, options) -> None:
    """Add declared options (`dormant_tasks.options.Option`: a request's fields, `options_of`, or a command's own)
    to `parser`, each in its `--help` group (made on first use) in the order given."""
    groups = {g.title: g for g in parser._action_groups}
    for option in options:
        target = parser
        if option.group is not None:
            target = groups.get(option.group) or groups.setdefault(
                option.group, parser.add_argument_group(option.group)
            )
        kw = dict(option.kw)
        if kw.get("action") == "list":
            kw["action"] = ListOption
        if isinstance(kw.get("default"), Computed):
            kw["default"] = kw["default"].value()
        target.add_argument(option.flag, help=option.help, **kw)
        if option.defaults:
            parser.set_defaults(**option.defaults)


def add_global_flags(parser: argparse.ArgumentParser, default=False) -> None:
    """`--debug` and `--verbose` on `dormant` and on every (sub)subcommand, so they go anywhere on the line.

    Below the top level they default to SUPPRESS: `dormant --debug status` keeps the value given first.
    """
    group = parser.add_argument_group("global options")
    group.add_argument(
        "--debug", action="store_true", default=default, help="show the traceback of an error (also: $DORMANT_DEBUG=1)"
    )
    group.add_argument("--verbose", action="store_true", default=default, help="show every Prefect run log line")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                add_global_flags(nested, default=argparse.SUPPRESS)
