"""Run requests: one frozen, validated object per run (`TrackRequest`, `EvalRequest`).

The CLI (or a Python caller) builds a request once; the flow receives it whole and hands it to the
library, which reads its fields. Nothing copies options from layer to layer. A request validates itself
in `__post_init__` (one `ConfigError` naming the bad field and the fix), is saved as JSON beside the
results it produced (`store.write_request`; rows carry its `request_id`), and `from_json` rebuilds an
identical request from that file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import types
import typing
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any

from dormant_tasks.checkpoints.naming import Selection, is_local_source
from dormant_tasks.devices import Device, DType, parse_device, parse_dtype  # noqa: F401 (re-exported)
from dormant_tasks.engine.score_functions import parse_score_functions
from dormant_tasks.errors import ConfigError, did_you_mean
from dormant_tasks.store.input_scores import InputScoresPolicy
from dormant_tasks.tracking.defaults import FDR
from dormant_tasks.tracking.masks import parse_tau_option

# Bump when a field is added or changes meaning; `from_json` refuses a request of a newer version.
# 2: evaluate requests name `tasks` (was `task`) and carry the protocol; 3: `calibrations`; 4: track requests
# carry `tokens_per_step`, evaluate requests `rendering`, `system_instruction`, `precision` and `thresholds`;
# 5: evaluate requests carry `chat_date`
REQUEST_VERSION = 5
DEFAULT_EVAL_SCORES = ("ahon_ln", "lthon_ln", "awft")
DEFAULT_QUANTILES = (0.0, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30)


class Runner(StrEnum):
    """Where the checkpoints of a track run are scored."""

    LOCAL = "local"  # Prefect's thread runner: one checkpoint scoring while the next downloads
    DASK = "dask"  # one task per checkpoint on a Dask cluster (local processes or --address)


class Mode(StrEnum):
    """How an evaluation picks the heads it zeroes (docs/SCORES.md §6)."""

    DYNAMIC = "dynamic"  # per input and layer, from the already-intervened activations (the paper's protocol)
    STATIC = "static"  # a fixed (layer, head) set: the tracker's dormancy mask of the checkpoint


class ChatTemplate(StrEnum):
    """Whether evaluation prompts go through the tokenizer's chat template (lm-eval's apply_chat_template)."""

    AUTO = "auto"  # the authors' rule: when the model id contains -Instruct, -chat, -SFT or -DPO
    ON = "on"
    OFF = "off"


class Bos(StrEnum):
    """Whether the tokenizer may add its BOS token to an evaluation request (docs/SCORES.md §6)."""

    PAPER = "paper"  # lm-eval 0.4.5 (the authors'): add_special_tokens=False for causal models (True for Gemma)
    TOKENIZER = "tokenizer"  # lm-eval 0.4.13: the tokenizer decides, unless the text starts with the BOS string


class Rendering(StrEnum):
    """How requests are rendered under a chat template (without one, both are lm-eval's plain text)."""

    PAPER = "paper"  # as lm-eval 0.4.5 (the authors'): target delimiter kept, WinoGrande's option after the header
    LM_EVAL = "lm-eval"  # as the installed lm-eval (0.4.13): no delimiter, each option in a user turn


class Precision(StrEnum):
    """How an evaluated model's weights are loaded."""

    DTYPE = "dtype"  # in --dtype (float32 by default)
    PAPER = "paper"  # the authors': OLMo-2 ids float16 with 8-bit weights (bitsandbytes), others their own dtype


class ThresholdSource(StrEnum):
    """Where the dynamic sweep's thresholds come from."""

    OWN = "own"  # quantiles of this run's un-intervened scores
    AUTHORS = "authors"  # the authors' frozen thresholds.json; refused for a model, task or function it lacks
    AUTO = "auto"  # the authors' where they cover the (model, task, function), else our own


class DataSource(StrEnum):
    """Where evaluation datasets come from."""

    AUTO = "auto"  # bundled when HF_DATASETS_OFFLINE or HF_HUB_OFFLINE is set, else the Hub
    HUB = "hub"  # as lm-eval loads them
    BUNDLED = "bundled"  # the copies inside this package (dormant_tasks/data/tasks)


def _enum(cls: type[StrEnum], value, name: str) -> StrEnum:
    try:
        return cls(value)
    except ValueError:
        choices = [m.value for m in cls]
        raise ConfigError(
            f"{name} {value!r}{did_you_mean(str(value), choices)}: use one of {', '.join(choices)}"
        ) from None


# The option a request field comes from, where its name differs (`--` + the field's name with "-" otherwise).
_OPTION_OF = {
    "source": "--model",
    "score_fns": "--scores",
    "taus": "--tau",
    "calibrations": "--calibration",
    "report": "--no-report",
    "series": "--series",
    "selection": "--revisions/--steps/--every/--max",
}
# Fields that name a file or folder: a Python caller may pass a Path.
_PATH_FIELDS = frozenset({"store", "texts", "cache_dir", "reports_dir", "calibrations"})
MAX_SEED = 2**63 - 1  # any seed the random baseline takes and a Parquet int64 column holds


def option_of(name: str) -> str:
    """The command-line option of a request field (`score_fns` -> `--scores`)."""
    return _OPTION_OF.get(name, "--" + name.replace("_", "-"))


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


def _check_types(request) -> None:
    """ConfigError naming the first field whose value has the wrong type (a hand-edited request file, a Python
    caller); each field's values are checked after this, in `__post_init__`."""
    hints = typing.get_type_hints(type(request))
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if isinstance(value, str) and typing.get_origin(hints[f.name]) is tuple:
            _set(request, f.name, (value,))  # one name where a list is expected: a list of one
        elif f.name in _PATH_FIELDS and isinstance(value, str) and not value.strip():
            raise ConfigError(f"{option_of(f.name)} is empty: name a path, or leave the option out")
        elif not _is(value, hints[f.name], f.name in _PATH_FIELDS):
            shown = repr(value if not isinstance(value, list) else tuple(value))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ConfigError(f"{f.name} ({option_of(f.name)}) must be {_kind(hints[f.name])}, got {shown}")


def _positive(value: int | None, name: str) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def parse_chat_date(value) -> date:
    """`--chat-date`: a calendar day written YYYY-MM-DD; ConfigError (one line) for anything else."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    text = str(value).strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        with contextlib.suppress(ValueError):  # e.g. 2024-02-30
            return date.fromisoformat(text)
    raise ConfigError(
        f"--chat-date {value!r} is not a day written YYYY-MM-DD (e.g. 2024-07-26): give the date the chat template "
        "should see"
    )


def _set(obj, name: str, value) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass's own field in __post_init__


def _absolute(path: str | None) -> str | None:
    """Paths are stored absolute, so a saved request means the same thing from any working directory."""
    return None if path is None else str(Path(path).expanduser().resolve())


def _check_series_name(name) -> None:
    from dormant_tasks.store.io import series_slug

    try:
        series_slug(name if isinstance(name, str) else "")
    except Exception:  # noqa: BLE001 - the store's StoreError, said as the option's
        raise ConfigError(
            f"--series-name {name!r}: use letters, digits, '.', '_', '-' (no '--' or '..'), e.g. tiny-olmo2-rerun"
        ) from None


def _calibration_name(name: str) -> str:
    """A bundled set's name as is; anything else is a text file, stored absolute."""
    from dormant_tasks.tracking.calibration import bundled_set_names

    name = str(name).strip()
    if not name:
        raise ConfigError("--calibration is empty: name a bundled set or a UTF-8 text file")
    if name in bundled_set_names() or not Path(name).expanduser().exists():
        return name  # a bundled set, or an unknown name that loading refuses with the bundled names listed
    return str(_absolute(name))


_MAX_REQUEST_BYTES = 1 << 20  # a saved request is about 1 kB; a larger file is not one (and is not read whole)


def _selection_of(value) -> Selection:
    """A saved request's `selection` object as a `Selection`; ConfigError for an unknown key or a wrong type."""
    if isinstance(value, Selection):
        return value
    if value is None:
        return Selection()
    if not isinstance(value, dict):
        raise ConfigError(f"selection must be an object (revisions_glob, steps, every, max_n), got {value!r:.60}")
    names = [f.name for f in dataclasses.fields(Selection)]
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ConfigError(
            f"the request's selection has unknown field {unknown[0]!r}{did_you_mean(unknown[0], names)}; "
            f"its fields: {', '.join(names)}"
        )
    steps = value.get("steps")
    if steps is not None and not isinstance(steps, list):  # `--steps A:B` is saved as [A, B]
        raise ConfigError(f"selection's steps must be a list [A, B] (null for an open side) or null, got {steps!r:.60}")
    return Selection(
        value.get("revisions_glob") or (),
        None if steps is None else tuple(steps),
        value.get("every"),
        value.get("max_n"),
    )


def model_id_for(source: str) -> str:
    """A Hub repo id as is; a local series by its folder name (e.g. `tiny-olmo2`)."""
    return Path(source).expanduser().resolve().name if is_local_source(source) else str(source)


def source_identity(source: str) -> str:
    """What a series is, whatever its name: "hub:ORG/NAME", or "local:" and the folder's resolved path (recorded
    in the store at the series' first write: `store.io.record_source`)."""
    return f"local:{Path(source).expanduser().resolve()}" if is_local_source(source) else f"hub:{source}"


class _Request:
    """JSON round trip and identity, shared by both request kinds."""

    KIND = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.KIND, "request_version": REQUEST_VERSION}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every request kind is a dataclass
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omit_unset"):  # a newer option left unset: ids stay as they were
                continue
            if isinstance(value, Selection):
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
        if version == 1 and cls.KIND == "evaluate":  # v1 had one `task` and always 0-shot by default
            data["tasks"] = [data.pop("task", "winogrande")]
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # a dataclass subclass
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"the request has unknown field {unknown[0]!r}{did_you_mean(unknown[0], names)}")
        if "selection" in data:
            data["selection"] = _selection_of(data["selection"])
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

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


@dataclass(frozen=True)
class TrackRequest(_Request):
    """Everything that fixes a `track` run: the series, the selection, what is scored and how, where it runs."""

    KIND = "track"

    source: str  # Hub repo id, or a folder of checkpoint folders (stored absolute)
    store: str  # Parquet store folder (stored absolute)
    selection: Selection = field(default_factory=Selection)
    include_main: bool = False  # also list `main`, ordered after every other checkpoint
    tokens_per_step: int | None = None  # tokens of `step{N}` / `ckpt_{N}` names (default: the series' known value)
    score_fns: tuple[str, ...] | None = None  # None: all 16
    taus: tuple[str, ...] = ()  # `--tau FN=VALUE` / `FN=qQ`, on top of the defaults
    reference: str | None = None  # the reference revision of quantile taus (default: the series' last)
    retau: bool = False  # replace the series' stored taus
    texts: str | None = None  # calibration texts file (default: the bundled WinoGrande dev sentences)
    calibrations: tuple[str, ...] = ()  # `--calibration`: bundled set names or text files, scored in one pass
    limit: int | None = None  # first N calibration texts of each set (default 128)
    batch_size: int | None = None  # inputs per forward pass (None: 8 on a CPU, by tokens alone on a GPU)
    max_tokens: int | None = None  # truncate inputs to this many tokens (default: the model's context)
    max_batch_tokens: int | None = None  # padded tokens per batch (default: the score engine's budget)
    dtype: DType = DType.FLOAT32
    device: Device | str = Device.AUTO  # or "cuda:N" (devices.parse_device)
    seed: int = 0  # of the random baseline
    input_scores: InputScoresPolicy = InputScoresPolicy.AUTO  # keep per-input scores (auto: when small)
    cache_dir: str | None = None  # Hugging Face cache for downloads (default: HF_HUB_CACHE)
    keep_checkpoints: bool = False  # keep downloaded revisions after scoring
    runner: Runner = Runner.LOCAL
    address: str | None = None  # scheduler of an existing Dask cluster (runner dask)
    workers: int | None = None  # workers of a local Dask cluster (runner dask; default 2)
    report: bool = True  # render the report at the end
    reports_dir: str | None = None  # default: reports/<series>/
    fail_fast: bool = False  # stop at the first checkpoint that fails (default: record it, go on with the rest)
    # the series' name in the store (default: the Hub id, or the folder's name); not saved when unset
    series_name: str | None = field(default=None, metadata={"omit_unset": True})
    fdr: float = FDR  # a transition is confident when its Benjamini-Hochberg q-value is below this

    def __post_init__(self):
        if self.input_scores is None or isinstance(self.input_scores, bool):  # saved before the policy existed
            _set(self, "input_scores", {True: "keep", False: "drop", None: "auto"}[self.input_scores])
        _check_types(self)
        if not self.source.strip():
            raise ConfigError("--model is empty: name a Hub repo id (org/name) or a folder of checkpoint folders")
        if self.series_name is not None:
            _check_series_name(self.series_name)
        if is_local_source(self.source):
            _set(self, "source", _absolute(self.source))
        for name in ("store", "texts", "cache_dir", "reports_dir"):
            _set(self, name, _absolute(getattr(self, name)))
        names = (self.calibrations,) if isinstance(self.calibrations, str) else tuple(self.calibrations or ())
        _set(self, "calibrations", tuple(_calibration_name(n) for n in names))
        if self.texts and self.calibrations:
            raise ConfigError(
                "--texts and --calibration both name calibration sets: pass the file as --calibration FILE"
            )
        if not isinstance(self.selection, Selection):
            raise ConfigError("selection must be a Selection (built from --revisions/--steps/--every/--max)")
        if self.selection.revisions_glob and self.selection.steps is not None:
            raise ConfigError(
                "--steps and --revisions both select checkpoints: use one of them "
                "(--revisions 'stage1-step1?000-*' or --steps 10000:19000)"
            )
        _set(self, "score_fns", None if self.score_fns is None else tuple(parse_score_functions(self.score_fns)))
        _set(self, "taus", tuple(self.taus))
        fns = self.score_fns or parse_score_functions(None)
        for t in self.taus:
            spec = parse_tau_option(t)
            if spec.score_fn not in fns:
                raise ConfigError(
                    f"--tau given for {spec.score_fn!r}, which is not among the scored functions; "
                    "add it to --scores or drop the --tau"
                )
        for name in ("tokens_per_step", "limit", "batch_size", "max_tokens", "max_batch_tokens", "workers"):
            _positive(getattr(self, name), f"--{name.replace('_', '-')}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"--seed must be 0 or more (at most 2**63 - 1), got {self.seed}")
        _set(self, "dtype", parse_dtype(self.dtype))
        _set(self, "device", parse_device(self.device))
        _set(self, "runner", _enum(Runner, self.runner, "--runner"))
        _set(self, "input_scores", _enum(InputScoresPolicy, self.input_scores, "--input-scores"))
        if self.runner is Runner.LOCAL and (self.address or self.workers):
            flag = "--address" if self.address else "--workers"
            raise ConfigError(f"{flag} is for a Dask cluster: add --runner dask, or drop {flag}")
        if self.address and self.workers:
            raise ConfigError("--workers sizes a local Dask cluster; with --address the cluster exists: drop --workers")
        if isinstance(self.fdr, bool) or not isinstance(self.fdr, int | float) or not 0 < self.fdr < 1:
            raise ConfigError(f"--fdr {self.fdr}: a false discovery rate lies between 0 and 1 (e.g. {FDR})")
        _set(self, "fdr", float(self.fdr))
        if self.reports_dir and not self.report:
            raise ConfigError("--reports-dir with --no-report: drop one of them")

    @property
    def model_id(self) -> str:
        return self.series_name or model_id_for(self.source)

    @property
    def source_identity(self) -> str:
        return source_identity(self.source)

    @property
    def score_fn_ids(self) -> tuple[str, ...]:
        return tuple(self.score_fns or parse_score_functions(None))

    @cached_property
    def calibration_sets(self) -> tuple:
        """Every calibration set of the run, the series' primary one first (read once per request object)."""
        from dormant_tasks.tracking.calibration import load_calibration, load_calibration_sets

        if self.calibrations:
            return load_calibration_sets(self.calibrations, self.limit)
        return (load_calibration(self.texts, self.limit),)

    @property
    def calibration(self):
        """The primary calibration set (the first; its content hash is the calibration_id)."""
        return self.calibration_sets[0]


@dataclass(frozen=True)
class EvalRequest(_Request):
    """Everything that fixes an `evaluate` run: which checkpoint(s), task, functions, mode, thresholds."""

    KIND = "evaluate"

    model: str  # checkpoint folder or Hub repo; with series=True the tracked repo or series folder
    store: str
    revision: str | None = None
    series: bool = False  # every tracked checkpoint of `model`, with its static tracker mask
    tasks: tuple[str, ...] = ("winogrande",)  # lm-eval task, group or tag names
    shots: int | None = None  # None: the authors' count per task (eval_tasks.PAPER_SHOTS), else lm-eval's default
    score_fns: tuple[str, ...] = DEFAULT_EVAL_SCORES
    mode: Mode | None = None  # None: dynamic, or static with series=True
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    limit: int | None = None  # first N items of every (leaf) task
    batch_size: int = 16
    dtype: DType = DType.FLOAT32
    device: Device | str = Device.AUTO  # or "cuda:N" (devices.parse_device)
    chat_template: ChatTemplate = ChatTemplate.AUTO
    bos: Bos = Bos.PAPER
    datasets: DataSource = DataSource.AUTO
    log_samples: bool = False  # one `evaluation_items` row per item and setting
    rendering: Rendering = Rendering.PAPER  # chat-templated prompts as lm-eval 0.4.5 (paper) or 0.4.13 rendered them
    system_instruction: str | None = None  # a system turn (chat) or prefix (plain) before every prompt
    precision: Precision = Precision.DTYPE
    thresholds: ThresholdSource = ThresholdSource.OWN
    chat_date: str | None = None  # YYYY-MM-DD, the day a chat template sees (None: the day the run starts)

    def __post_init__(self):
        _check_types(self)
        if not self.model.strip():
            raise ConfigError("--model is empty: name a checkpoint folder or a Hub repo id")
        if is_local_source(self.model):
            _set(self, "model", _absolute(self.model))
        _set(self, "store", _absolute(self.store))
        mode = None if self.mode is None else _enum(Mode, self.mode, "--mode")
        if self.series and mode is Mode.DYNAMIC:
            raise ConfigError(
                "--series evaluates the tracker's static masks; --mode dynamic contradicts it: "
                "drop --mode, or drop --series and name one checkpoint"
            )
        if self.series and self.revision:
            raise ConfigError("--series evaluates every tracked checkpoint; --revision names one: drop one of them")
        _set(self, "mode", mode or (Mode.STATIC if self.series else Mode.DYNAMIC))
        _set(self, "score_fns", tuple(parse_score_functions(self.score_fns)))
        _set(self, "quantiles", tuple(float(q) for q in self.quantiles))
        if not self.quantiles or not all(0.0 <= q <= 1.0 for q in self.quantiles):
            raise ConfigError(f"--quantiles must be fractions in [0, 1] (e.g. 0.05 for 5%), got {list(self.quantiles)}")
        if self.mode is Mode.STATIC and self.quantiles != DEFAULT_QUANTILES:
            raise ConfigError(
                "--quantiles place the thresholds of --mode dynamic; static mode zeroes the tracker "
                "mask: drop --quantiles"
            )
        _positive(self.limit, "--limit")
        _positive(self.batch_size, "--batch-size")
        if self.shots is not None and (
            not isinstance(self.shots, int) or isinstance(self.shots, bool) or self.shots < 0
        ):
            raise ConfigError(f"--shots must be 0 or more, got {self.shots!r}")
        names = [self.tasks] if isinstance(self.tasks, str) else list(self.tasks)
        names = list(dict.fromkeys(p.strip() for t in names for p in str(t).split(",") if p.strip()))
        if not names:
            raise ConfigError("--tasks is empty: name an lm-eval task, e.g. --tasks winogrande or --tasks mmlu piqa")
        _set(self, "tasks", tuple(names))
        _set(self, "chat_template", _enum(ChatTemplate, self.chat_template, "--chat-template"))
        _set(self, "bos", _enum(Bos, self.bos, "--bos"))
        _set(self, "datasets", _enum(DataSource, self.datasets, "--datasets"))
        _set(self, "dtype", parse_dtype(self.dtype))
        _set(self, "device", parse_device(self.device))
        _set(self, "rendering", _enum(Rendering, self.rendering, "--rendering"))
        _set(self, "precision", _enum(Precision, self.precision, "--precision"))
        _set(self, "thresholds", _enum(ThresholdSource, self.thresholds, "--thresholds"))
        if self.chat_date is not None:
            _set(self, "chat_date", parse_chat_date(self.chat_date).isoformat())
        if self.precision is Precision.PAPER and self.dtype is not DType.FLOAT32:
            raise ConfigError(
                f"--precision paper fixes each model's dtype (OLMo-2: float16 with 8-bit weights, others their own); "
                f"--dtype {self.dtype} contradicts it: drop one of them"
            )
        if self.thresholds is not ThresholdSource.OWN and self.mode is Mode.STATIC:
            raise ConfigError("--thresholds places the thresholds of --mode dynamic; static mode zeroes the mask")
        if self.thresholds is not ThresholdSource.OWN and self.quantiles != DEFAULT_QUANTILES:
            raise ConfigError(
                f"--thresholds {self.thresholds}: the authors' thresholds exist at the quantiles 0, .05, ..., .30 only; "
                "drop --quantiles"
            )
