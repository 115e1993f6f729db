"""Command-line options, declared once: beside the request field each one sets (`declare` in the field's metadata),
or as a command's own option (`Option`); `flows/cli/options.add_options` builds argparse's parser from them.

An `Option` is what argparse needs (flag, help, type, choices, default, metavar, action, dest) plus its `--help`
group and the request field it sets. `options_of(Request)` reads a request class's fields in order: a field's flag
is `--` + its name with dashes unless declared; a bool field is a switch (`store_true`), a StrEnum field takes its
members as choices; a help that shows `%(default)s` shows the field's default. `fields_of(Request)` maps each
option's parsed name (argparse's dest) to its field, so a request is built from parsed options without a copy.

Light on purpose (stdlib and errors only): `--help` and the cheap refusals build the parser from here. The options
several commands share are declared in `dormant_tasks.grammar`; the statistics' options in `dormant_tasks.statistics`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types
import typing
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dormant_tasks.errors import ConfigError


@dataclass(frozen=True)
class Option:
    """One command-line option: `flag`, its `help`, its `--help` group (None: the command's own options), argparse's
    other keywords (`kw`: type, choices, default, metavar, action, nargs, dest, required; action "list" is the
    grammar's list option: space- or comma-separated, repeatable), what the command's checks read besides the
    value (`defaults`, e.g. `store_use`), and the request field it sets (None: the command's own)."""

    flag: str
    help: str = ""
    group: str | None = None
    kw: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    field: str | None = None

    @property
    def dest(self) -> str:
        """The option's parsed name (argparse's dest)."""
        return self.kw.get("dest") or self.flag.lstrip("-").replace("-", "_")

    def placed(self, group: str | None) -> Option:
        """The same option under another `--help` group."""
        return dataclasses.replace(self, group=group)


@dataclass(frozen=True)
class Computed:
    """A default computed when the parser is built, not when the option is declared (it reads the environment)."""

    value: typing.Callable[[], Any]


def declare(first: Option | str, *more: Option, **kw) -> dict[str, Any]:
    """The metadata of a request field set by one option (`declare("help", metavar="N")`: the flag from the field's
    name unless `flag=`, its `--help` group `group=`, argparse's other keywords as they are; or a shared `Option`)
    or by several (`declare(opt_a, opt_b)`: a field of fields, e.g. the selection)."""
    if isinstance(first, str):
        group, flag = kw.pop("group", None), kw.pop("flag", "")
        return {"options": (Option(flag, first, group, kw),)}
    return {"options": (first, *more)}


@functools.cache
def options_of(cls) -> tuple[Option, ...]:
    """The options of a request class (a dataclass whose fields `declare` them), in field order; read once per class
    (a request built from options asks for them several times)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        for opt in f.metadata.get("options", ()):
            out.append(_completed(opt, f, hints[f.name]))
    return tuple(out)


def fields_of(cls) -> dict[str, str]:
    """Each option's parsed name -> the request field it sets (the selection's options: `selection`)."""
    return {opt.dest: opt.field for opt in options_of(cls) if opt.field}


def flag_of(cls, field_name: str) -> str:
    """The flag(s) of a request field (`score_fns` -> `--scores`), as its refusals name it."""
    return "/".join(o.flag for o in options_of(cls) if o.field == field_name) or "--" + field_name.replace("_", "-")


def _completed(opt: Option, f: dataclasses.Field, hint) -> Option:
    flag = opt.flag or "--" + f.name.replace("_", "-")
    kw = dict(opt.kw)
    base = _base(hint)
    if base is bool and "action" not in kw:
        kw["action"] = "store_true"
    elif isinstance(base, type) and issubclass(base, StrEnum) and not {"choices", "type"} & kw.keys():
        kw["choices"] = [m.value for m in base]
    elif base in (int, float) and "type" not in kw and "action" not in kw:
        kw["type"] = base
    if "%(default)s" in opt.help and "default" not in kw and f.default is not dataclasses.MISSING:
        kw["default"] = f.default
    return dataclasses.replace(opt, flag=flag, kw=kw, field=opt.field or f.name)


def _base(hint):
    """`X | None` -> X; anything else as it is."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint


# ---- value types: checked as the line is parsed, before anything is read or created ----


def bounded_int(option: str, low: int, high: int, rule: str | None = None):
    """An argparse `type` for an integer option from `low` to `high`: a value outside, or not an integer, is the
    one-line ConfigError "OPTION must be RULE, got VALUE" (`rule` default: "from LOW to HIGH"), at parse time,
    before any store is read."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise ConfigError(f"{option} must be {rule or f'from {low:,} to {high:,}'}, got {text}")
        return value

    parse.__name__ = option  # argparse's words for the option, should it name the type
    return parse


MAX_SEED = 2**63 - 1  # any seed the random baseline takes and a Parquet int64 column holds


def seed_type(option: str = "--seed"):
    """Every seed option's one rule, in the words of `track`'s request: an integer from 0 to `MAX_SEED`."""
    return bounded_int(option, 0, MAX_SEED, "0 or more (at most 2**63 - 1)")


def cores_seen() -> int:
    """The CPU cores this process may run on (its affinity: a container's or `taskset`'s limit, not the host's
    count), as torch sees them by default; stdlib, so `--help` stays light."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_type(text: str) -> int:
    n = int(text) if text.strip().isdigit() else 0
    if n < 1:
        raise ConfigError(f"--threads {text}: give a whole number of 1 or more (this process may use {cores_seen()})")
    return n
