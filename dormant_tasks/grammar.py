"""The grammar of `dormant`: the options several commands share, declared once (`dormant_tasks.options.Option`), one
name per concept in every command (docs/USAGE.md, "Command grammar"):
    --model      the thing analysed: a Hub repo id, a local folder, or a stored series' name (its slug)
    --store      the Parquet store folder
    --reports-dir  the report folder
    --out        what a command writes outside the store: a file (`score`), a folder (`publish`)
    --tasks      lm-eval tasks, space- or comma-separated, repeatable
    --scores     score functions, space- or comma-separated, repeatable
    --device / --dtype  from `dormant_tasks.devices`, the one vocabulary of the library
The requests' fields and the commands' own option lists name these; light, as `dormant_tasks.options`.
"""

from __future__ import annotations

from typing import Any

from dormant_tasks.devices import DEVICE_FORMS, DType, parse_device, parse_dtype
from dormant_tasks.names import check_series_name
from dormant_tasks.options import Computed, Option, cores_seen, threads_type
from dormant_tasks.paths import default_store


def series_name_type(text: str) -> str:
    """`--series-name`, checked as the line is parsed (`names.check_series_name`): before anything is created."""
    check_series_name(text)
    return text


def model_option(help: str, required: bool = True, many: bool = False, role: str = "source") -> Option:
    """`--model`: the thing analysed. `role` says what the cheap checks ask of it: `source` (must exist when
    spelled as a path; a stored series' name finds its folder), `series` (a stored series: a folder is read as
    its name), `checkpoint` (as `source`, and a folder must be one checkpoint, not a series), `new` (a folder this
    command creates)."""
    kw: dict[str, Any] = {"required": required, "metavar": "MODEL"} | ({"action": "list"} if many else {})
    return Option("--model", help + (" (required)" if required else ""), kw=kw, defaults={"model_role": role})


STORED_SERIES = model_option(
    "the series: a Hub repo id, its local folder or that folder's name, as `dormant status` lists them "
    "(default: the store's only series)",
    required=False,
    role="series",
)  # `--model` naming one series the store keeps (report, findings): optional when the store has only one


def store_option(use: str = "reads", published: bool = False) -> Option:
    """The one `--store` option of every command that reads or writes a store. `use`: `reads` (it must exist),
    `writes` (it, or the folder it is created in, must take a file), `updates` (as `writes` for a store yet to be
    created; an existing one may be read-only until the command has something to write) or `optional` (a stored
    series' name). Checked by `store.layout.check_store_path` (`preflight`), as the library checks it. `published`:
    the command also reads a series published on the Hub (`hf://datasets/ORG/NAME`, fetched by `preflight`)."""
    return Option(
        "--store",
        "Parquet store folder (default: $DORMANT_STORE or ./data/store)"
        + ("; or a published series, hf://datasets/ORG/NAME or a folder `dormant publish` wrote" if published else ""),
        kw={"default": Computed(lambda: str(default_store())), "metavar": "DIR"},
        defaults={"store_use": use, "store_published": published},
    )


def out_option(help: str, metavar: str = "FILE", required: bool = False) -> Option:
    """`--out`: what a command writes outside the store, a file (`score`) or a folder (`publish`)."""
    return Option("--out", help, kw={"required": required, "metavar": metavar})


SERIES_NAME = Option(
    "--series-name",
    "store the series under NAME (default: the Hub id, or the folder's name); a second source with the same name is "
    "refused, never merged",
    kw={"type": series_name_type, "metavar": "NAME"},
)


def reports_dir_option(help: str = "report folder (default: <$DORMANT_REPORTS or ./reports>/<series slug>/)") -> Option:
    return Option("--reports-dir", help, kw={"metavar": "DIR"})


def threads_option() -> Option:
    """`--threads`: torch's CPU threads for the tiny series' pretraining (`demo`, `pretrain-tiny`)."""
    return Option(
        "--threads",
        "torch CPU threads for the pretraining; its weights are the same for any N (default: the cores this process "
        "may use, %(default)s here)",
        kw={"type": threads_type, "default": cores_seen(), "metavar": "N"},
    )


def tasks_option(help: str, default=None) -> Option:
    return Option("--tasks", help, kw={"action": "list", "default": default, "metavar": "TASK"})


def scores_option(help: str, default=None, one: bool = False, group: str | None = None) -> Option:
    """`--scores`: score functions, space- or comma-separated; `one`: a command of one function takes one value
    (its usage says `--scores FN`; a comma list is refused by the command, naming how many it got)."""
    kw = {"action": "list", "default": default, "metavar": "FN"} | ({"nargs": None} if one else {})
    return Option("--scores", help, group, kw)


def dtype_option(group: str | None = None) -> Option:
    metavar = "|".join(d.value for d in DType)
    kw = {"default": DType.FLOAT32, "type": parse_dtype, "metavar": metavar}
    return Option("--dtype", "model dtype (default: %(default)s)", group, kw)


def device_option(what: str, group: str | None = None) -> Option:
    return Option(
        "--device",
        f"where to {what}: {DEVICE_FORMS} (default: %(default)s = cuda when a GPU is visible)",
        group,
        {"default": parse_device("auto"), "type": parse_device, "metavar": "DEVICE"},
    )


TEXTS = Option(
    "--texts",
    "calibration texts, UTF-8, one per line (default: WinoGrande dev sentences, blank filled)",
    kw={"metavar": "FILE"},
)
LIMIT = Option(
    "--limit",
    "first N texts of each calibration set, of --texts too: a file is read only that far (default: 128; a longer "
    "file gives a note)",
    kw={"type": int, "metavar": "N"},
)
CALIBRATION_BATCH_SIZE = Option(
    "--batch-size",
    "inputs per forward pass (default: 8 on a CPU; on a GPU batches are cut by padded tokens alone)",
    kw={"type": int, "default": None, "metavar": "N"},
)
MAX_TOKENS = Option(
    "--max-tokens",
    "truncate each input to N tokens (default: the model's context length)",
    kw={"type": int, "metavar": "N"},
)


SELECTION_GROUP = "checkpoint selection (applied in this order)"
# The options that pick which checkpoints of a series to analyse (see `Selection` for their order).
SELECTION = (
    Option(
        "--revisions",
        "keep revisions whose name matches this fnmatch pattern, e.g. 'stage1-*' (repeatable)",
        SELECTION_GROUP,
        {"action": "append", "metavar": "GLOB", "default": []},
    ),
    Option("--steps", "keep steps A..B inclusive; either side may be left out", SELECTION_GROUP, {"metavar": "A:B"}),
    Option(
        "--every",
        "keep every N-th checkpoint in training order, starting with the first",
        SELECTION_GROUP,
        {"type": int, "metavar": "N"},
    ),
    Option(
        "--max",
        "keep N checkpoints spread evenly in log(tokens), always the first and the last",
        SELECTION_GROUP,
        {"type": int, "metavar": "N", "dest": "max_n"},
    ),
)
INCLUDE_MAIN = Option(
    "--include-main",
    "also list the `main` revision (the final model), ordered last",
    SELECTION_GROUP,
    {"action": "store_true"},
)
# The token axis of a series whose checkpoint names carry no token count (`step1000`, `ckpt_010`).
TOKENS_PER_STEP = Option(
    "--tokens-per-step",
    "tokens per training step, for checkpoint names without a token count (step1000, ckpt_010): sequences per batch x "
    "sequence length (default: known for EleutherAI/pythia-*, 2,097,152)",
    kw={"type": int, "metavar": "N"},
)
