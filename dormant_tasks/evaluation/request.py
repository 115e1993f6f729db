"""`EvalRequest` and its choices: everything that fixes an `evaluate` run, validated once (the base:
`dormant_tasks.requests`)."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from dormant_tasks.checkpoints import source_for
from dormant_tasks.devices import Device, DType, parse_device, parse_dtype
from dormant_tasks.engine import parse_score_functions
from dormant_tasks.errors import ConfigError
from dormant_tasks.grammar import device_option, dtype_option, model_option, scores_option, store_option, tasks_option
from dormant_tasks.names import split_names
from dormant_tasks.options import declare
from dormant_tasks.requests import Request, absolute_path, check_positive, check_types, parse_enum, set_field

DEFAULT_EVAL_SCORES = ("ahon_ln", "lthon_ln", "awft")
DEFAULT_QUANTILES = (0.0, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30)


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


@dataclass(frozen=True)
class EvalRequest(Request):
    """Everything that fixes an `evaluate` run: which checkpoint(s), task, functions, mode, thresholds."""

    KIND = "evaluate"

    # checkpoint folder or Hub repo; with series=True the tracked repo or series folder
    model: str = field(
        metadata=declare(
            model_option(
                "checkpoint folder or Hub repo id (with --series: the tracked repo, series folder or stored series "
                "name; required, unless --reproduce-seed)",
                required=False,
                role="checkpoint",
            )
        )
    )
    store: str = field(metadata=declare(store_option(use="writes")))
    revision: str | None = field(default=None, metadata=declare("Hub revision (branch) of --model", metavar="REV"))
    tasks: tuple[str, ...] = field(  # lm-eval task, group or tag names
        default=("winogrande",),
        metadata=declare(
            tasks_option("lm-eval tasks, groups and tags, space- or comma-separated (default: winogrande)")
        ),
    )
    shots: int | None = field(  # None: the authors' count per task (eval_tasks.PAPER_SHOTS), else lm-eval's default
        default=None,
        metadata=declare(
            "few-shot examples for every task (default: the authors' count, 5 for winogrande/gsm8k and every task of "
            "the mmlu group, 0 for piqa; lm-eval's task default otherwise)",
            metavar="N",
        ),
    )
    chat_template: ChatTemplate = field(
        default=ChatTemplate.AUTO,
        metadata=declare(
            "apply the tokenizer's chat template (auto: when the model id contains -Instruct, -chat, -SFT or -DPO, the "
            "authors' rule) (default: %(default)s)"
        ),
    )
    bos: Bos = field(
        default=Bos.PAPER,
        metadata=declare(
            "paper: no BOS added, as lm-eval 0.4.5 encoded requests; tokenizer: as the tokenizer adds it (lm-eval "
            "0.4.13) (default: %(default)s)"
        ),
    )
    # chat-templated prompts as lm-eval 0.4.5 (paper) or 0.4.13 rendered them
    rendering: Rendering = field(
        default=Rendering.PAPER,
        metadata=declare(
            "how chat-templated prompts are rendered: paper, as lm-eval 0.4.5 (the authors') did (target delimiter "
            "kept, WinoGrande's option after the assistant header); lm-eval, as the installed lm-eval 0.4.13 does "
            "(default: %(default)s; without a chat template both are the same)"
        ),
    )
    system_instruction: str | None = field(  # a system turn (chat) or prefix (plain) before every prompt
        default=None,
        metadata=declare(
            "a system instruction before every prompt (a system turn under a chat template)", metavar="TEXT"
        ),
    )
    chat_date: str | None = field(  # YYYY-MM-DD, the day a chat template sees (None: the day the run starts)
        default=None,
        metadata=declare(
            "the day a chat template sees as today (Llama-3.x writes it into the system header; recorded per row as "
            "chat_date); fix it to get the same prompts on another day (default: the day the run starts)",
            type=lambda text: parse_chat_date(text).isoformat(),  # checked as it is parsed, before the other checks
            metavar="YYYY-MM-DD",
        ),
    )
    precision: Precision = field(
        default=Precision.DTYPE,
        metadata=declare(
            "dtype: load in --dtype; paper: as the authors, OLMo-2 ids in float16 with 8-bit weights (needs "
            "bitsandbytes: pip install 'dormant-heads[int8]'), others in the checkpoint's own dtype "
            "(default: %(default)s)"
        ),
    )
    thresholds: ThresholdSource = field(
        default=ThresholdSource.OWN,
        metadata=declare(
            "own: quantiles of this run's un-intervened scores; authors: the authors' frozen thresholds.json (their 14 "
            "models; mmlu, piqa, winogrande); auto: theirs where they cover the model, task and function, else own "
            "(default: %(default)s)"
        ),
    )
    datasets: DataSource = field(
        default=DataSource.AUTO,
        metadata=declare(
            "task data from the Hub or the bundled copies (auto: bundled when HF_DATASETS_OFFLINE or HF_HUB_OFFLINE "
            "is set) (default: %(default)s)"
        ),
    )
    log_samples: bool = field(  # one `evaluation_items` row per item and setting
        default=False,
        metadata=declare("store one evaluation_items row per item and setting (prediction, correct, log-likelihoods)"),
    )
    score_fns: tuple[str, ...] = field(
        default=DEFAULT_EVAL_SCORES,
        metadata=declare(scores_option("score functions, space- or comma-separated (default: ahon_ln lthon_ln awft)")),
    )
    mode: Mode | None = field(  # None: dynamic, or static with series=True
        default=None,
        metadata=declare(
            "dynamic: the paper's per-input zeroing; static: the tracker's mask (default: dynamic, static with --series)"
        ),
    )
    series: bool = field(  # every tracked checkpoint of `model`, with its static tracker mask
        default=False,
        metadata=declare("evaluate the static tracker mask of every stored checkpoint of --model"),
    )
    quantiles: tuple[float, ...] = field(
        default=DEFAULT_QUANTILES,
        metadata=declare(
            "dynamic thresholds as quantiles of the un-intervened scores (default: 0 .05 ... .30)",
            type=float,
            nargs="+",
            metavar="Q",
        ),
    )
    limit: int | None = field(  # first N items of every (leaf) task
        default=None, metadata=declare("first N items of every task (default: all)", metavar="N")
    )
    batch_size: int = field(default=16, metadata=declare("items per forward pass (default: %(default)s)", metavar="N"))
    dtype: DType = field(default=DType.FLOAT32, metadata=declare(dtype_option()))
    # or "cuda:N" (devices.parse_device)
    device: Device | str = field(default=Device.AUTO, metadata=declare(device_option("run")))

    @classmethod
    def upgrade_fields(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        if version == 1:  # v1 had one `task` and always 0-shot by default
            data = dict(data)
            data["tasks"] = [data.pop("task", "winogrande")]
        return data

    def __post_init__(self):
        check_types(self)
        if not self.model.strip():
            raise ConfigError("--model is empty: name a checkpoint folder or a Hub repo id")
        set_field(self, "model", source_for(self.model).spec)  # a folder: absolute; a Hub id as is
        set_field(self, "store", absolute_path(self.store))
        mode = None if self.mode is None else parse_enum(Mode, self.mode, "--mode")
        if self.series and mode is Mode.DYNAMIC:
            raise ConfigError(
                "--series evaluates the tracker's static masks; --mode dynamic contradicts it: "
                "drop --mode, or drop --series and name one checkpoint"
            )
        if self.series and self.revision:
            raise ConfigError("--series evaluates every tracked checkpoint; --revision names one: drop one of them")
        set_field(self, "mode", mode or (Mode.STATIC if self.series else Mode.DYNAMIC))
        set_field(self, "score_fns", tuple(parse_score_functions(self.score_fns)))
        set_field(self, "quantiles", tuple(float(q) for q in self.quantiles))
        if not self.quantiles or not all(0.0 <= q <= 1.0 for q in self.quantiles):
            raise ConfigError(f"--quantiles must be fractions in [0, 1] (e.g. 0.05 for 5%), got {list(self.quantiles)}")
        if self.mode is Mode.STATIC and self.quantiles != DEFAULT_QUANTILES:
            raise ConfigError(
                "--quantiles place the thresholds of --mode dynamic; static mode zeroes the tracker "
                "mask: drop --quantiles"
            )
        check_positive(self.limit, "--limit")
        check_positive(self.batch_size, "--batch-size")
        if self.shots is not None and (
            not isinstance(self.shots, int) or isinstance(self.shots, bool) or self.shots < 0
        ):
            raise ConfigError(f"--shots must be 0 or more, got {self.shots!r}")
        names = split_names(self.tasks)
        if not names:
            raise ConfigError("--tasks is empty: name an lm-eval task, e.g. --tasks winogrande or --tasks mmlu piqa")
        set_field(self, "tasks", names)
        set_field(self, "chat_template", parse_enum(ChatTemplate, self.chat_template, "--chat-template"))
        set_field(self, "bos", parse_enum(Bos, self.bos, "--bos"))
        set_field(self, "datasets", parse_enum(DataSource, self.datasets, "--datasets"))
        set_field(self, "dtype", parse_dtype(self.dtype))
        set_field(self, "device", parse_device(self.device))
        set_field(self, "rendering", parse_enum(Rendering, self.rendering, "--rendering"))
        set_field(self, "precision", parse_enum(Precision, self.precision, "--precision"))
        set_field(self, "thresholds", parse_enum(ThresholdSource, self.thresholds, "--thresholds"))
        if self.chat_date is not None:
            set_field(self, "chat_date", parse_chat_date(self.chat_date).isoformat())
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
