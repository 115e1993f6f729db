"""The grammar of `dormant`: the options several commands share, defined once, and the parser that enforces it.

One name per concept in every command (README, "Command grammar"):
    --model      the thing analysed: a Hub repo id, a local folder, or a stored series' name (its slug)
    --store      the Parquet store folder
    --reports-dir  the report folder
    --out        the one file a command writes (`score`)
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
import functools
import json
import os
import re
import socket
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

from dormant_tasks.devices import DEVICE_FORMS, DType, check_device_available, parse_device, parse_dtype
from dormant_tasks.errors import CheckpointError, ConfigError, DormantError, StoreError, did_you_mean
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
        try:
            namespace, extras = super().parse_known_args(args, namespace)
        except DormantError as e:
            self.exit(2, f"{self.prog}: error: {e}\n")
        if extras and " " in self.prog:  # a subcommand: the wrong flag is its own to report
            self.error(self._unrecognized(extras[0]))
        if " " in self.prog:
            namespace.given = self._given(args)
        return namespace, extras

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
        for value in values if isinstance(values, list) else [values]:
            items += [p.strip() for p in str(value).split(",") if p.strip()]
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


def add_store_argument(parser, use: str = "reads") -> None:
    """The one `--store` option of every command that reads or writes a store. `use`: `reads` (it must exist),
    `writes` (it, or the folder it is created in, must take a file), `updates` (as `writes` for a store yet to be
    created; an existing one may be read-only until the command has something to write) or `optional` (a stored
    series' name)."""
    parser.add_argument(
        "--store",
        default=str(default_store()),
        metavar="DIR",
        help="Parquet store folder (default: $DORMANT_STORE or ./data/store)",
    )
    parser.set_defaults(store_use=use)


def add_series_name_argument(parser) -> None:
    parser.add_argument(
        "--series-name",
        metavar="NAME",
        help="store the series under NAME (default: the Hub id, or the folder's name); a second source with the "
        "same name is refused, never merged",
    )


def add_reports_dir_argument(
    parser, help: str = "report folder (default: <$DORMANT_REPORTS or ./reports>/<series slug>/)"
) -> None:
    parser.add_argument("--reports-dir", metavar="DIR", help=help)


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


# ---- the forms of --model ----


def is_path_like(value: str) -> bool:
    """Spelled as a folder (./x, /x, ~/x, x/, a/b/c: a Hub id is org/name, one slash), an existing one, or inside
    an existing folder (data/x where ./data is one: a mistyped local path, not the Hub org "data"): never read
    as a Hub id."""
    return (
        value.startswith((".", "/", "~"))
        or value.endswith("/")
        or value.count("/") >= 2
        or Path(value).expanduser().exists()
        or ("/" in value and Path(value.split("/")[0]).is_dir())
    )


def missing_folder(value: str) -> str:
    """Why a `--model` path does not exist: the nearest folder that does, and the closest of its subfolders."""
    path = Path(value).expanduser()
    nearest = path.parent
    while str(nearest) not in (".", "/") and not nearest.is_dir():
        nearest = nearest.parent
    if path.exists():
        return f"--model {value} is a file, not a folder"
    missing = path.relative_to(nearest).parts[0] if nearest != path else path.name
    subfolders = sorted(p.name for p in nearest.iterdir() if p.is_dir()) if nearest.is_dir() else []
    close = did_you_mean(missing, subfolders)
    where = "the working folder" if str(nearest) == "." else str(nearest)
    suggestion = f"; did you mean {nearest / close.split(chr(34))[1]}?" if close else ""
    return f"--model {value}: no such folder ({where} has no {missing}{suggestion})"


_CHECKPOINT_FILE = "config.json"


def check_checkpoint_folder(value: str) -> None:
    """CheckpointError when a local `--model` that must be one checkpoint (score, evaluate) is not: a series
    folder (its checkpoint subfolders named) or a folder without config.json. Reads one folder listing."""
    path = Path(value).expanduser()
    if (path / _CHECKPOINT_FILE).is_file():
        return
    checkpoints = sorted(
        (p.name for p in path.iterdir() if (p / _CHECKPOINT_FILE).is_file()),
        key=lambda name: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)],
    )
    if checkpoints:
        shown = ", ".join(checkpoints[:5]) + (f", ... ({len(checkpoints)} in all)" if len(checkpoints) > 5 else "")
        raise CheckpointError(
            f"--model {value} is a series folder, not one checkpoint; name one of its checkpoints ({shown}), "
            f"e.g. --model {path / checkpoints[-1]}"
        )
    raise CheckpointError(
        f"--model {value} has no {_CHECKPOINT_FILE}: name a checkpoint folder (config.json, weights and tokenizer) "
        "or a Hub repo id (org/name)"
    )


def series_name(value: str | None, store=None) -> str | None:
    """The stored series that `--model` names: a local folder is the series the store records it as the source
    of (`--series-name`), else its folder name; a Hub id or a series name as is."""
    if value is None or not Path(value).expanduser().is_dir():
        return value
    folder = Path(value).expanduser().resolve()
    if store is not None and Path(store).is_dir():
        from dormant_tasks.store.io import series_of_source  # the store's layout is the store's to know

        return series_of_source(store, f"local:{folder}") or folder.name
    return folder.name


def stored_sources(store, name: str) -> list[str]:
    """The local folders whose series the store keeps under `name` (read from its saved track requests)."""
    if not Path(store).is_dir():
        return []
    from dormant_tasks.store.io import request_path  # the store's layout is the store's to know

    try:
        folder = request_path(store, name, "request").parent
    except StoreError:  # a name that cannot name a series
        return []
    found = set()
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        source = data.get("source") if isinstance(data, dict) and data.get("kind") == "track" else None
        if isinstance(source, str) and Path(source).name == name and Path(source).is_dir():
            found.add(source)
    return sorted(found)


def source_for(value: str, store) -> str:
    """A `--model` source: a folder or a Hub id as given; a stored local series' name (a folder name: no "/")
    -> its folder."""
    if is_path_like(value) or store is None or "/" in value:
        return value
    if Path(store).is_dir():
        from dormant_tasks.store.io import recorded_source

        try:
            recorded = recorded_source(store, value)
        except StoreError:  # a name that cannot name a series
            recorded = None
        if recorded is not None and recorded.startswith("local:"):
            return recorded.removeprefix("local:")
    sources = stored_sources(store, value)
    if len(sources) > 1:
        raise ConfigError(
            f"--model {value}: the store keeps {len(sources)} local series of that name ({', '.join(sources)}); "
            "pass the folder"
        )
    return sources[0] if sources else value


# ---- cheap checks: run before any heavy import (boundary.run_command) ----


def preflight(args: argparse.Namespace) -> None:
    """The checks that need no library: the device is visible, the store is a (writable) folder, a model folder
    exists, the Hub answers. Each raises the error class the library raises for the same input (ConfigError,
    StoreError, CheckpointError), seconds earlier."""
    if getattr(args, "device", None) is not None and not getattr(args, "address", None):
        check_device_available(args.device)  # (an existing Dask cluster's GPUs are on its workers, not here)
    if getattr(args, "store", None) is not None:
        check_store_path(args.store, getattr(args, "store_use", "reads"))
    if getattr(args, "reports_dir", None) is not None:
        args.reports_dir = str(check_reports_dir(args.reports_dir))
    model, role = getattr(args, "model", None), getattr(args, "model_role", None)
    if isinstance(model, str) and not model.strip():
        raise ConfigError(f"--model is empty: name one (`dormant {args.command} --help` says what it takes)")
    if isinstance(model, str) and role == "new":
        check_new_folder(model, "--model")
    if isinstance(model, str) and role in ("source", "checkpoint"):
        args.model = source_for(model, getattr(args, "store", None))
        if args.model != model and Path(args.model).name != model and getattr(args, "series_name", "") is None:
            args.series_name = model  # a series stored under --series-name, named by that name
        if is_path_like(args.model) and not Path(args.model).expanduser().is_dir():
            raise CheckpointError(  # the class `checkpoints.naming` raises for a missing series folder
                f"{missing_folder(args.model)}: name a checkpoint folder (or a folder of them), a Hub repo id "
                "(org/name) or a series the store keeps"
            )
        if role == "checkpoint" and is_path_like(args.model) and not getattr(args, "series", None):
            check_checkpoint_folder(args.model)
        elif not is_path_like(args.model) and not offline("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") and hub_silence():
            raise CheckpointError(
                f"--model {args.model}: the Hub at {hub_endpoint()} does not answer ({hub_silence()}); check the "
                "network, or set HF_HUB_OFFLINE=1 to use the models already in the Hugging Face cache"
            )
    elif role == "series":
        store = getattr(args, "store", None)
        args.model = [series_name(m, store) for m in model] if isinstance(model, list) else series_name(model, store)
    hub_datasets_fallback(args)


def check_store_path(store, use: str) -> None:
    """StoreError when --store is a file, is missing for a command that reads it, or cannot take a file for a
    command that writes it."""
    if not str(store).strip():
        raise StoreError("--store is empty: name a store folder, or leave --store out for ./data/store")
    root = Path(store).expanduser()
    shown = store if root.is_absolute() else f"{store} (in the working folder {Path.cwd()})"
    if root.exists() and not root.is_dir():
        raise StoreError(f"--store {shown} is a file, not a folder: pass a store folder")
    if use == "reads" and not root.exists():
        raise StoreError(f"--store {shown} does not exist: pass the right --store, or fill one with `dormant track`")
    if use == "updates" and root.is_dir():  # `track`: a rerun with nothing to do only reads an existing store (it
        return  # may be read-only); the command checks it can write once it knows it has work
    if use not in ("writes", "updates"):
        return
    folder = root
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise StoreError(f"--store {shown}: {folder} is a file, not a folder; choose another --store")
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        raise StoreError(
            f"--store {shown}: {folder}: Read-only file system; choose another --store, or remount it writable"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"--store {shown}: {folder} is not writable; fix its permissions or choose another --store")
    why = cannot_create_in(folder)
    if why:
        raise StoreError(f"--store {shown}: no file can be created in {folder} ({why}); choose another --store")


def check_reports_dir(reports_dir: str) -> Path:
    """`--reports-dir` as an absolute path (`.` names the working folder by its name), once it is known that the
    report can be written there: ConfigError for an empty value, a file, or a folder that takes no file."""
    if not reports_dir.strip():
        raise ConfigError("--reports-dir is empty: name a folder, or leave it out for reports/<series>/")
    out = Path(reports_dir).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--reports-dir {reports_dir} is a file, not a folder: name a folder")
    folder = nearest_folder(out, "--reports-dir", reports_dir)
    # the report is written beside its folder, then renamed into place: that parent must take files, and so
    # must the folder itself when it exists (a mount point such as /proc does not)
    for where in dict.fromkeys([out.parent if out.parent.exists() else folder, folder]):
        why = cannot_create_in(where)
        if why:
            raise ConfigError(
                f"--reports-dir {reports_dir}: no file can be created in {where} ({why}); choose another folder"
            )
    return out


def nearest_folder(path: Path, option: str, value: str) -> Path:
    """`path` or its nearest existing ancestor, where a new folder would be made; ConfigError when that is a file."""
    folder = path
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"{option} {value}: {folder} is a file, not a folder; choose another folder")
    return folder


def check_new_folder(value: str, option: str) -> None:
    """ConfigError unless `value` is a folder, or can be made one (its nearest existing parent takes files)."""
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {value} is a file: name a folder (new, empty, or a previous run's)")
    folder = nearest_folder(path, option, value)
    why = None if path.is_dir() else cannot_create_in(folder)
    if why:
        raise ConfigError(f"{option} {value}: no folder can be created in {folder} ({why}); choose another folder")


def cannot_create_in(folder: Path) -> str | None:
    """Why no file can be created in the existing `folder` (None when one can): a real, removed probe, since
    neither permissions nor the mount flags tell about /proc, a FUSE mount or a full disk."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".dormant-probe-"):
            pass
    except OSError as e:
        return e.strerror or type(e).__name__
    return None


# ---- the Hub, asked once and briefly ----

HUB_PROBE_S = 2.0


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def offline(*names: str) -> bool:
    return any(os.environ.get(n, "").strip().lower() in ("1", "true", "yes", "on") for n in names)


def hub_silence() -> str | None:
    """None when the Hub's host ($HF_ENDPOINT) takes a TCP connection within HUB_PROBE_S, else why not; asked
    once per process and endpoint (the Hub client itself retries for a minute before it gives up).

    A silent Hub switches this process offline (`go_offline`): every later Hub access of the run (tokenizers,
    configs, datasets) then reads the Hugging Face cache or fails at once, instead of its own retry loops."""
    reason = _probe(hub_endpoint(), HUB_PROBE_S)
    if reason:
        gooffline()
    return reason


def gooffline() -> None:
    """HF_HUB_OFFLINE / HF_DATASETS_OFFLINE for the rest of the process. The Hub client reads them when it is
    first imported (normally later: preflight runs before heavy imports); one imported already is told too."""
    os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]


@functools.cache
def _probe(endpoint: str, timeout_s: float) -> str | None:
    """In a thread, so that a hanging name lookup costs `timeout_s` too."""
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    outcome: list[str | None] = []

    def connect():
        try:
            socket.create_connection((url.hostname, port), timeout=timeout_s).close()
            outcome.append(None)
        except OSError as e:
            outcome.append(str(e) or type(e).__name__)

    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(timeout_s)
    return outcome[0] if outcome else f"no answer within {timeout_s:g} s"


def hub_datasets_fallback(args: argparse.Namespace) -> None:
    """`--datasets auto` without an offline variable reads task data from the Hub: when the Hub does not answer,
    the bundled copies are used at once (one note) instead of after a minute of retries."""
    if getattr(args, "datasets", None) != "auto" or offline("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        return
    reason = hub_silence()
    if reason:
        args.datasets = "bundled"
        args.hub_note = (  # printed by the command once its own checks pass (`print_hub_note`), never before an error
            f"dormant {args.command}: note: the Hub at {hub_endpoint()} does not answer ({reason}): task data from the "
            "bundled copies (--datasets bundled)"
        )


def add_fdr_argument(parser, default=None) -> None:
    """--fdr: the false discovery rate below which a transition's q-value makes it confident."""
    from dormant_tasks.tracking.defaults import FDR

    parser.add_argument(
        "--fdr",
        type=float,
        default=default,
        metavar="Q",
        help="false discovery rate of a confident transition: its Benjamini-Hochberg q-value over every "
        f"(head, interval) test of the function is below Q (default: {FDR})",
    )


def add_statistics_arguments(parser) -> None:
    """--fdr, --resamples and --seed: how the findings decide a confident transition and draw their intervals."""
    from dormant_tasks.tracking.defaults import FDR, RESAMPLES, SEED

    add_fdr_argument(parser, FDR)
    parser.add_argument(
        "--resamples",
        type=int,
        default=RESAMPLES,
        metavar="N",
        help="bootstrap resamples of the heads for the findings' intervals (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=int, default=SEED, metavar="N", help="seed of the resampling (default: %(default)s)"
    )


def print_hub_note(args: argparse.Namespace) -> None:
    """The note of `hub_datasets_fallback`, once the command's checks have passed (so an unrelated error is one
    line); printed once."""
    note = getattr(args, "hub_note", None)
    if note:
        print(note, file=sys.stderr)
        args.hub_note = None


def add_max_tokens_argument(parser) -> None:
    """`--max-tokens`, one definition for `track` and `score`."""
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="truncate each input to N tokens (default: the model's context length)",
    )
