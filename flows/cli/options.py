"""The grammar of `dormant`: the options several commands share, defined once, and the parser that enforces it.

One name per concept in every command (docs/USAGE.md, "Command grammar"):
    --model      the thing analysed: a Hub repo id, a local folder, or a stored series' name (its slug)
    --store      the Parquet store folder
    --reports-dir  the report folder
    --out        what a command writes outside the store: a file (`score`), a folder (`publish`)
    --tasks      lm-eval tasks, space- or comma-separated, repeatable
    --scores     score functions, space- or comma-separated, repeatable
    --device / --dtype  from `dormant_tasks.devices`, the one vocabulary of the library
Old spellings (`--repo`, `--series DIR`, `--task`, `--score-fn`, `--models`, `report --out`, `pretrain-tiny
--out`) keep working for one release and print one deprecation note on stderr. `--debug` and `--verbose` are
accepted anywhere on the line. Every parse error is one stderr line, `dormant CMD: error: ...`, exit 2.

`preflight` runs the cheap checks (device, store folder, model folder, one Hub probe) before any heavy import.
stdlib only here: building the parser stays light.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from dormant_tasks.devices import DEVICE_FORMS, DType, parse_device, parse_dtype
from dormant_tasks.errors import ConfigError, DormantError, did_you_mean
from dormant_tasks.names import check_series_name, split_names
from dormant_tasks.paths import default_store

DTYPES = [d.value for d in DType]

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


# ---- the shared options ----


def add_model_argument(parser, help: str, required: bool = True, many: bool = False, role: str = "source") -> None:
    """`--model`: the thing analysed. `role` says what the cheap checks ask of it: `source` (must exist when
    spelled as a path; a stored series' name finds its folder), `series` (a stored series: a folder is read as
    its name), `checkpoint` (as `source`, and a folder must be one checkpoint, not a series), `new` (a folder this
    command creates)."""
    kwargs = {"action": ListOption} if many else {}
    parser.add_argument(
        "--model",
        required=required,
        metavar="MODEL",
        help=help + (" (required)" if required else ""),
        **kwargs,
    )
    parser.set_defaults(model_role=role)


def add_stored_series_argument(parser) -> None:
    """`--model` naming one series the store keeps (report, findings): optional when the store has only one."""
    add_model_argument(
        parser,
        "the series: a Hub repo id, its local folder or that folder's name, as `dormant status` lists them "
        "(default: the store's only series)",
        required=False,
        role="series",
    )


def add_store_argument(parser, use: str = "reads", published: bool = False) -> None:
    """The one `--store` option of every command that reads or writes a store. `use`: `reads` (it must exist),
    `writes` (it, or the folder it is created in, must take a file), `updates` (as `writes` for a store yet to be
    created; an existing one may be read-only until the command has something to write) or `optional` (a stored
    series' name). Checked by `store.layout.check_store_path` (`preflight`), as the library checks it. `published`:
    the command also reads a series published on the Hub (`hf://datasets/ORG/NAME`, fetched by `preflight`)."""
    parser.add_argument(
        "--store",
        default=str(default_store()),
        metavar="DIR",
        help="Parquet store folder (default: $DORMANT_STORE or ./data/store)"
        + ("; or a published series, hf://datasets/ORG/NAME or a folder `dormant publish` wrote" if published else ""),
    )
    parser.set_defaults(store_use=use, store_published=published)


def add_out_argument(parser, help: str, metavar: str = "FILE", required: bool = False) -> None:
    """`--out`: what a command writes outside the store, a file (`score`) or a folder (`publish`)."""
    parser.add_argument("--out", required=required, metavar=metavar, help=help)


def series_name_type(text: str) -> str:
    """`--series-name`, checked as the line is parsed (`names.check_series_name`): before anything is created."""
    check_series_name(text)
    return text


def add_series_name_argument(parser) -> None:
    parser.add_argument(
        "--series-name",
        type=series_name_type,
        metavar="NAME",
        help="store the series under NAME (default: the Hub id, or the folder's name); a second source with the "
        "same name is refused, never merged",
    )


def add_reports_dir_argument(
    parser, help: str = "report folder (default: <$DORMANT_REPORTS or ./reports>/<series slug>/)"
) -> None:
    parser.add_argument("--reports-dir", metavar="DIR", help=help)


def cores_seen() -> int:
    """The CPU cores this process may run on (its affinity: a container's or `taskset`'s limit, not the host's
    count), as torch sees them by default; stdlib, so `--help` stays light."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _threads(text: str) -> int:
    n = int(text) if text.strip().isdigit() else 0
    if n < 1:
        raise ConfigError(f"--threads {text}: give a whole number of 1 or more (this process may use {cores_seen()})")
    return n


def add_threads_argument(parser) -> None:
    """`--threads`: torch's CPU threads for the tiny series' pretraining (`demo`, `pretrain-tiny`)."""
    parser.add_argument(
        "--threads",
        type=_threads,
        default=cores_seen(),
        metavar="N",
        help="torch CPU threads for the pretraining; its weights are the same for any N (default: the cores this "
        "process may use, %(default)s here)",
    )


def add_tasks_argument(parser, help: str, default=None) -> None:
    parser.add_argument("--tasks", action=ListOption, default=default, metavar="TASK", help=help)


def add_scores_argument(parser, help: str, default=None, one: bool = False) -> None:
    """`--scores`: score functions, space- or comma-separated; `one`: a command of one function takes one value
    (its usage says `--scores FN`; a comma list is refused by the command, naming how many it got)."""
    extra = {"nargs": None} if one else {}
    parser.add_argument("--scores", action=ListOption, default=default, metavar="FN", help=help, **extra)


def add_dtype_argument(parser) -> None:
    parser.add_argument(
        "--dtype",
        default=DType.FLOAT32,
        type=parse_dtype,
        metavar="|".join(DTYPES),
        help="model dtype (default: %(default)s)",
    )


def add_device_argument(parser, what: str) -> None:
    parser.add_argument(
        "--device",
        default=parse_device("auto"),
        type=parse_device,
        metavar="DEVICE",
        help=f"where to {what}: {DEVICE_FORMS} (default: %(default)s = cuda when a GPU is visible)",
    )


def add_calibration_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The calibration set and its batching, as `track` and `score` read them."""
    parser.add_argument(
        "--texts",
        metavar="FILE",
        help="calibration texts, UTF-8, one per line (default: WinoGrande dev sentences, blank filled)",
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="first N texts of each calibration set, of --texts too: a file is read only that far "
        "(default: 128; a longer file gives a note)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        metavar="N",
        help="inputs per forward pass (default: 8 on a CPU; on a GPU batches are cut by padded tokens alone)",
    )


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


def add_fdr_argument(parser, default=None, method_default=None) -> None:
    """--fdr and --fdr-method: the false discovery rate of the heads called to change confident state."""
    from dormant_tasks.statistics import FDR, FDR_METHOD, FDR_METHODS

    parser.add_argument(
        "--fdr",
        type=float,
        default=default,
        metavar="Q",
        help="false discovery rate of the heads called to change confident state (a confident transition goes "
        f"between opposite confident states; docs/SCORES.md) (default: {FDR})",
    )
    parser.add_argument(
        "--fdr-method",
        choices=tuple(FDR_METHODS),
        default=method_default,
        help="its correction over heads: bh = Benjamini-Hochberg (independent or positively dependent heads), "
        f"by = Benjamini-Yekutieli (any dependence) (default: {FDR_METHOD})",
    )


def add_statistics_arguments(parser) -> None:
    """--fdr, --resamples and --seed: how the findings decide a confident transition and draw their intervals."""
    from dormant_tasks.statistics import FDR, FDR_METHOD

    add_fdr_argument(parser, FDR, FDR_METHOD)
    add_resampling_arguments(parser, "bootstrap resamples (of layers and heads) for the findings' intervals")


# The most bootstrap resamples a command takes: 50 times the default, past which an interval's ends no longer
# move (a billion would run for days and be printed as if it had been used).
MAX_RESAMPLES = 100_000


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


def seed_type(option: str = "--seed"):
    """Every seed option's one rule, in the words of `track`'s request: an integer from 0 to `requests.MAX_SEED`."""
    from dormant_tasks.requests import MAX_SEED

    return bounded_int(option, 0, MAX_SEED, "0 or more (at most 2**63 - 1)")


def add_resampling_arguments(parser, resamples_help: str, low: int = 1) -> None:
    """--resamples and --seed: how many bootstrap resamples of what (`resamples_help`; from `low` to
    `MAX_RESAMPLES`), drawn from which seed."""
    from dormant_tasks.statistics import RESAMPLES, SEED

    parser.add_argument(
        "--resamples",
        type=bounded_int(
            "--resamples", low, MAX_RESAMPLES, f"from {low}{' (no intervals)' * (low == 0)} to {MAX_RESAMPLES:,}"
        ),
        default=RESAMPLES,
        metavar="N",
        help=f"{resamples_help} (default: %(default)s; at most {MAX_RESAMPLES:,})",
    )
    parser.add_argument(
        "--seed", type=seed_type(), default=SEED, metavar="N", help="seed of the resampling (default: %(default)s)"
    )


def add_max_tokens_argument(parser) -> None:
    """`--max-tokens`, one definition for `track` and `score`."""
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="truncate each input to N tokens (default: the model's context length)",
    )
