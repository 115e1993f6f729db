"""The base of run requests: one frozen, validated object per run, owned by its part (`tracking.TrackRequest`,
`evaluation.EvalRequest`); this module is what they share, with no dependency on either (errors only).

The CLI (or a Python caller) builds a request once; the flow receives it whole and hands it to the
library, which reads its fields. Nothing copies options from layer to layer. A request validates itself
in `__post_init__` (one `ConfigError` naming the bad field and the fix), is saved as JSON beside the
results it produced (`store.write_request`; rows carry its `request_id`), and `from_json` rebuilds an
identical request from that file (`Request`: the JSON round trip, the kind and version checks, `request_id`;
the field type checks every request kind gets).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import types
import typing
from enum import StrEnum
from pathlib import Path
from typing import Any

from dormant_tasks.errors import ConfigError, did_you_mean
from dormant_tasks.options import MAX_SEED as MAX_SEED  # re-exported: the requests' rule
from dormant_tasks.options import fields_of, flag_of, options_of
from dormant_tasks.paths import absolute_path as absolute_path  # re-exported: the requests' paths

# Bump when a field is added or changes meaning; `from_json` refuses a request of a newer version.
# 2: evaluate requests name `tasks` (was `task`) and carry the protocol; 3: `calibrations`; 4: track requests
# carry `tokens_per_step`, evaluate requests `rendering`, `system_instruction`, `precision` and `thresholds`;
# 5: evaluate requests carry `chat_date`
REQUEST_VERSION = 5


def parse_enum(cls: type[StrEnum], value, name: str) -> StrEnum:
    try:
        return cls(value)
    except ValueError:
        choices = [m.value for m in cls]
        raise ConfigError(
            f"{name} {value!r}{did_you_mean(str(value), choices)}: use one of {', '.join(choices)}"
        ) from None


# Fields that name a file or folder: a Python caller may pass a Path.
_PATH_FIELDS = frozenset({"store", "texts", "cache_dir", "reports_dir", "calibrations"})


def _option_names(cls) -> dict[str, str]:
    """Each name a request option goes by (its long name, dashes as underscores, and its parsed name) -> the
    parsed name."""
    out = {}
    for o in options_of(cls):
        out[o.flag.removeprefix("--").replace("-", "_")] = out[o.dest] = o.dest
    return out


def _is(value, hint, path_ok: bool) -> bool:
    """Whether `value` is of the annotated type: the JSON types a request holds (str, int, float, bool, None,
    lists of them) and the StrEnums, written as their value."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is(value, a, path_ok) for a in args)
    if origin is tuple:
        return isinstance(value, list | tuple) and all(_is(v, args[0], path_ok) for v in value)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str or (isinstance(hint, type) and issubclass(hint, StrEnum)):
        return isinstance(value, str) or (path_ok and isinstance(value, os.PathLike))
    return isinstance(value, hint)


def _kind(hint) -> str:
    """The annotated type in words, for the message of a wrong one."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        words = [_kind(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(words)) + (" or null" if type(None) in args else "")
    if origin is tuple:
        return f"a list of {_kind(args[0]).removeprefix('a ').removeprefix('an ')}s"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if hint in names:
        return names[hint]
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return "one of " + ", ".join(m.value for m in hint)
    return f"a {hint.__name__}"


def check_types(request) -> None:
    """ConfigError naming the first field whose value has the wrong type (a hand-edited request file, a Python
    caller); each field's values are checked after this, in `__post_init__`."""
    hints = typing.get_type_hints(type(request))
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if isinstance(value, str) and typing.get_origin(hints[f.name]) is tuple:
            set_field(request, f.name, (value,))  # one name where a list is expected: a list of one
        elif f.name in _PATH_FIELDS and isinstance(value, str) and not value.strip():
            raise ConfigError(f"{flag_of(type(request), f.name)} is empty: name a path, or leave the option out")
        elif not _is(value, hints[f.name], f.name in _PATH_FIELDS):
            shown = repr(value if not isinstance(value, list) else tuple(value))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ConfigError(
                f"{f.name} ({flag_of(type(request), f.name)}) must be {_kind(hints[f.name])}, got {shown}"
            )


def check_positive(value: int | None, name: str) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


MIN_MAX_TOKENS = 2  # with one token a head can attend only to it: every score is the same, whatever the head


def check_max_tokens(value: int | None) -> None:
    """ConfigError for a `--max-tokens` no score can be read from (`--max-tokens 1` gave 0% dormant everywhere,
    and advice to change tau)."""
    check_positive(value, "--max-tokens")
    if value is not None and value < MIN_MAX_TOKENS:
        raise ConfigError(
            f"--max-tokens {value}: with one token each head can attend only to that token, so its score is the same "
            f"for every head and says nothing; give at least {MIN_MAX_TOKENS} (leave it out for the model's context)"
        )


def set_field(obj, name: str, value) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass's own field in __post_init__


_MAX_REQUEST_BYTES = 1 << 20  # a saved request is about 1 kB; a larger file is not one (and is not read whole)


class Request:
    """JSON round trip and identity, shared by every request kind (a frozen dataclass subclass)."""

    KIND = ""

    @classmethod
    def option_names(cls) -> frozenset[str]:
        """The names `from_options` takes: each option's long name and its parsed name, dashes as underscores
        (`max_batch_tokens`, `max` or `max_n`)."""
        return frozenset(_option_names(cls))

    @classmethod
    def from_options(cls, **options):
        """The request of the command's options, as a Python caller or the parsed command line gives them: an
        option left out or None takes its default, as on the command line; a list is a repeated option.
        ConfigError for an option the command does not have (with the nearest name)."""
        known = cls.option_names()
        for name in options:
            if name not in known:
                raise ConfigError(f"{cls.KIND} has no option {name!r}{did_you_mean(name, sorted(known))}")
        dest = _option_names(cls)
        fields = cls.fields_of_options({dest[k]: tuple(v) if isinstance(v, list) else v for k, v in options.items()})
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # every request is a dataclass
            if f.name not in fields and f.default is f.default_factory is dataclasses.MISSING:
                raise ConfigError(cls.missing(f.name))
        return cls(**fields)

    @classmethod
    def missing(cls, name: str) -> str:
        """The refusal of a request whose field `name` (one without a default) no option set."""
        return f"{flag_of(cls, name)} is required"

    @classmethod
    def fields_of_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """The fields that parsed `options` set (a kind with options of other shapes adds them)."""
        field = fields_of(cls)
        return {field[k]: v for k, v in options.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.KIND, "request_version": REQUEST_VERSION}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every request kind is a dataclass
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omit_unset"):  # a newer option left unset: ids stay as they were
                continue
            if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a nested record, e.g. a selection
                value = dataclasses.asdict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value.value if isinstance(value, StrEnum) else value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

    @property
    def request_id(self) -> str:
        """A short hash of every option: equal ids <=> the same request."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        data = dict(data)
        kind, version = data.pop("kind", None), data.pop("request_version", None)
        if kind is None:
            raise ConfigError(
                f'the request has no "kind" (a {cls.KIND!r} request says "kind": "{cls.KIND}"); '
                "pass a file written by dormant-heads"
            )
        if kind != cls.KIND:
            raise ConfigError(f"this is a {kind!r} request, not a {cls.KIND!r} one: pass it to `dormant {kind}`")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ConfigError(
                f"the request's request_version is {version!r}, not a positive integer; pass a file written by "
                "dormant-heads"
            )
        if version > REQUEST_VERSION:
            raise ConfigError(
                f"the request has request_version {version!r}; this dormant-heads reads up to "
                f"{REQUEST_VERSION}: upgrade dormant-heads (pip install -U dormant-heads)"
            )
        data = cls.upgrade_fields(data, version)
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # a dataclass subclass
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"the request has unknown field {unknown[0]!r}{did_you_mean(unknown[0], names)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in cls.read_fields(data).items()})

    @classmethod
    def upgrade_fields(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        """A saved request's fields as this version names them (a kind whose fields changed overrides this)."""
        return data

    @classmethod
    def read_fields(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The saved fields that are objects, rebuilt (a kind with such a field overrides this)."""
        return data

    @classmethod
    def from_json(cls, text: str):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"the request is not valid JSON ({e}); pass a file written by dormant-heads") from None
        except RecursionError:
            raise ConfigError("the request's JSON is nested too deeply; pass a file written by dormant-heads") from None
        if not isinstance(data, dict):
            raise ConfigError("the request JSON is not an object; pass a file written by dormant-heads")
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: str | Path, option: str = "--request"):
        """The request saved in `path` (a `<store>/requests/.../*.json` file): ConfigError naming `option` for a
        file that is missing, a folder, unreadable, not UTF-8, or not a request."""
        path = Path(path).expanduser()
        fix = "pass a <store>/requests/.../*.json file"
        if path.is_dir():
            raise ConfigError(f"{option} {str(path)!r} is a folder; {fix}")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read(_MAX_REQUEST_BYTES + 1)
        except FileNotFoundError:
            raise ConfigError(f"{option} {str(path)!r}: no such file; {fix}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{option} {str(path)!r} is not a UTF-8 text file; {fix}") from None
        except OSError as e:
            raise ConfigError(f"{option} {str(path)!r} cannot be read ({e.strerror or e}); {fix}") from None
        if len(text) > _MAX_REQUEST_BYTES:
            raise ConfigError(
                f"{option} {str(path)!r} is larger than any request ({_MAX_REQUEST_BYTES:,} bytes); {fix}"
            )
        try:
            return cls.from_json(text)
        except ConfigError as e:
            raise ConfigError(f"{option} {str(path)!r}: {e}") from None

    @classmethod
    def coerce(cls, value):
        """A request from itself or its dict (a deployment's parameters arrive from the API as JSON)."""
        return value if isinstance(value, cls) else cls.from_dict(value)
