"""`TrackRequest`: everything that fixes a `track` run, validated once (the base: `dormant_tasks.requests`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any

from dormant_tasks.checkpoints import Selection, source_for
from dormant_tasks.devices import Device, DType, parse_device, parse_dtype
from dormant_tasks.engine import ALL_IDS, TRACKED_IDS, ScoringOptions, parse_score_functions
from dormant_tasks.errors import ConfigError, did_you_mean
from dormant_tasks.grammar import (
    CALIBRATION_BATCH_SIZE,
    INCLUDE_MAIN,
    LIMIT,
    MAX_TOKENS,
    SELECTION,
    SERIES_NAME,
    TEXTS,
    TOKENS_PER_STEP,
    device_option,
    dtype_option,
    model_option,
    reports_dir_option,
    scores_option,
    store_option,
)
from dormant_tasks.names import check_series_name
from dormant_tasks.options import declare
from dormant_tasks.requests import (
    MAX_SEED,
    Request,
    absolute_path,
    check_max_tokens,
    check_positive,
    check_types,
    parse_enum,
    set_field,
)
from dormant_tasks.statistics import FDR, FDR_METHODS, PAIRED_FDR_FAMILIES, fdr_options, paired_fdr_option
from dormant_tasks.store import INPUT_SCORES_AUTO_LIMIT, InputScoresPolicy
from dormant_tasks.tracking.calibration import bundled_set_names

_FDR, _FDR_METHOD = fdr_options(group="execution")
_PAIRED_FDR = paired_fdr_option(None, group="execution")


class Runner(StrEnum):
    """Where the checkpoints of a track run are scored."""

    LOCAL = "local"  # Prefect's thread runner: one checkpoint scoring while the next downloads
    DASK = "dask"  # one task per checkpoint on a Dask cluster (local processes or --address)


def _calibration_name(name: str) -> str:
    """A bundled set's name (or `NAME:K`) as is; anything else is a text file (or `FILE:K`), stored absolute."""
    from dormant_tasks.tracking.calibration import bundled_set_names, split_part

    name = str(name).strip()
    if not name:
        raise ConfigError("--calibration is empty: name a bundled set or a UTF-8 text file")
    base, part = split_part(name)
    if base in bundled_set_names() or not Path(base).expanduser().exists():
        return name  # a bundled set, or an unknown name that loading refuses with the bundled names listed
    return str(absolute_path(base)) + (f":{part}" if part is not None else "")


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


# The selection's options (their parsed names) -> the fields of `Selection` they set; `max` is `--max` as a Python
# caller spells it (`dormant_tasks.track(..., max=8)`).
SELECTION_OPTIONS = {
    "revisions": "revisions_glob",
    "steps": "steps",
    "every": "every",
    "max_n": "max_n",
    "max": "max_n",
}

# `dormant track --help`'s groups
BUDGET = 'budgeted search (docs/USAGE.md, "Budgeted search")'
SCORING = "scoring"
ON_DISK = "checkpoints on disk"
EXECUTION = "execution"
_LEFT_OUT = [fn for fn in ALL_IDS if fn not in TRACKED_IDS]


@dataclass(frozen=True)
class TrackRequest(Request):
    """Everything that fixes a `track` run: the series, the selection, what is scored and how, where it runs. Each
    field declares its `dormant track` option (`dormant_tasks.options`): the parser is built from these fields."""

    KIND = "track"

    # Hub repo id, or a folder of checkpoint folders (stored absolute)
    source: str = field(
        metadata=declare(
            model_option(
                "the series: a Hub repo id (e.g. allenai/OLMo-2-0425-1B), a folder of checkpoint folders, or the name "
                "of a local series the store keeps (required unless --request)",
                required=False,
            )
        )
    )
    store: str = field(metadata=declare(store_option(use="updates")))  # (stored absolute); a finished rerun reads it
    # the series' name in the store (default: the Hub id, or the folder's name); not saved when unset
    series_name: str | None = field(default=None, metadata={"omit_unset": True, **declare(SERIES_NAME)})
    # tokens of `step{N}` / `ckpt_{N}` names (default: the series' known value)
    tokens_per_step: int | None = field(default=None, metadata=declare(TOKENS_PER_STEP))
    selection: Selection = field(default_factory=Selection, metadata=declare(*SELECTION))
    include_main: bool = field(default=False, metadata=declare(INCLUDE_MAIN))  # `main`, after every other checkpoint
    # `--budget N`: at most N checkpoints of the selection scored in all, chosen by the budgeted search
    # (tracking.budget); `--resolution R`: an interval located enough once its end has <= (1+R)x its start's tokens
    budget: int | None = field(
        default=None,
        metadata={
            "omit_unset": True,
            **declare(
                "score at most N checkpoints of the selection in all (those stored count): a coarse pass log-spaced in "
                "tokens, then the middle checkpoint of the intervals where dormancy changed, until every change lies "
                "between adjacent checkpoints or N are scored; a rerun continues (default: score every one)",
                group=BUDGET,
                metavar="N",
            ),
        },
    )
    resolution: float | None = field(
        default=None,
        metadata={
            "omit_unset": True,
            **declare(
                "with --budget: stop refining an interval once its end has at most (1+R) times its start's tokens "
                "(e.g. 0.1: within 10%%; default: down to adjacent checkpoints)",
                group=BUDGET,
                metavar="R",
            ),
        },
    )
    # None: the default set (engine.TRACKED_IDS), or a stored series' own
    score_fns: tuple[str, ...] | None = field(
        default=None,
        metadata=declare(
            scores_option(
                f"score functions, space- or comma-separated, or 'all' (default: the {len(TRACKED_IDS)} whose default "
                f"taus mark heads on any model, all but {', '.join(_LEFT_OUT)}, which --scores all adds; a tracked "
                "series: its own; docs/SCORES.md §4)",
                group=SCORING,
            )
        ),
    )
    taus: tuple[str, ...] = field(  # `--tau FN=VALUE` / `FN=qQ`, on top of the defaults
        default=(),
        metadata=declare(
            "fix a tau: a value (ahon_ln=0.4) or a quantile of the reference checkpoint (ahon=q0.15); repeatable",
            flag="--tau",
            group=SCORING,
            action="append",
            default=[],
            metavar="FN=VALUE|FN=qQ",
            dest="taus",
        ),
    )
    reference: str | None = field(  # the reference revision of quantile taus (default: the series' last)
        default=None,
        metadata=declare(
            "reference checkpoint of quantile taus (default: the last checkpoint of the whole series)",
            group=SCORING,
            metavar="REV",
        ),
    )
    retau: bool = field(  # replace the series' stored taus
        default=False,
        metadata=declare(
            "replace the series' stored taus (re-aggregates from kept per-input scores, else rescores)", group=SCORING
        ),
    )
    # calibration texts file (default: the bundled WinoGrande dev sentences)
    texts: str | None = field(default=None, metadata=declare(TEXTS.placed(SCORING)))
    limit: int | None = field(default=None, metadata=declare(LIMIT.placed(SCORING)))  # first N texts of each set
    # inputs per forward pass (None: 8 on a CPU, by tokens alone on a GPU)
    batch_size: int | None = field(default=None, metadata=declare(CALIBRATION_BATCH_SIZE.placed(SCORING)))
    # `--calibration`: bundled set names or text files, scored in one pass
    calibrations: tuple[str, ...] = field(
        default=(),
        metadata=declare(
            "a calibration set, repeatable: a bundled set or a UTF-8 text file (one text per line); every set is scored "
            "on each loaded checkpoint and keeps its own taus, masks and transitions; the first is the series' primary "
            "set. Bundled: " + ", ".join(bundled_set_names()) + " (default: winogrande). A plain name is the set's "
            "first N texts (--limit; winogrande's are the authors' protocol); NAME:K is the K-th of disjoint sets drawn "
            "at random (seed 0) from all of NAME, cluster-whole (WinoGrande twins together), e.g. winogrande:1 "
            "winogrande:2 to compare two samples of one text; FILE:K is the K-th block of N lines of a file (a "
            "contiguous cut), or its K-th disjoint draw with --sample; induction-probe is Xu's synthetic batch of token "
            "ids for the head roles (2,000 sequences of 256 tokens; --limit N takes N)",
            flag="--calibration",
            group=SCORING,
            action="append",
            metavar="NAME",
        ),
    )
    # `--sample N`: a file's set is N texts drawn at random (FILE:K the K-th draw); not saved when unset
    sample: int | None = field(
        default=None,
        metadata={
            "omit_unset": True,
            **declare(
                "draw N texts of each text file at random (seed 0), cluster-whole, instead of taking its first lines; "
                "FILE:K is then the K-th of disjoint draws",
                group=SCORING,
                metavar="N",
            ),
        },
    )
    # `--cluster-field NAME`: text files are JSON Lines, each text's cluster in NAME; not saved when unset
    cluster_field: str | None = field(
        default=None,
        metadata={
            "omit_unset": True,
            **declare(
                'text files are JSON Lines: a string "text" and, in NAME, its cluster (texts of one document or source '
                "file), kept together by draws and by the input-dependence test (default: one line, one cluster)",
                group=SCORING,
                metavar="NAME",
            ),
        },
    )
    # truncate inputs to this many tokens (default: the model's context)
    max_tokens: int | None = field(default=None, metadata=declare(MAX_TOKENS.placed(SCORING)))
    max_batch_tokens: int | None = field(  # padded tokens per batch (default: the score engine's budget)
        default=None,
        metadata=declare(
            "padded tokens per batch, which bounds attention memory (default: the engine's budget)",
            group=SCORING,
            metavar="N",
        ),
    )
    dtype: DType = field(default=DType.FLOAT32, metadata=declare(dtype_option(SCORING)))
    # or "cuda:N" (devices.parse_device)
    device: Device | str = field(default=Device.AUTO, metadata=declare(device_option("score", SCORING)))
    seed: int = field(  # of the random baseline
        default=0,
        metadata=declare("seed of the random baseline (default: %(default)s)", group=SCORING, metavar="N"),
    )
    input_scores: InputScoresPolicy = field(  # keep per-input scores (auto: when small)
        default=InputScoresPolicy.AUTO,
        metadata=declare(
            "keep per-input scores (float32; they let --retau skip the model): auto keeps them while a checkpoint has "
            f"at most {INPUT_SCORES_AUTO_LIMIT:,} values (default: auto); `dormant store gc` drops them later",
            group=SCORING,
        ),
    )
    cache_dir: str | None = field(  # Hugging Face cache for downloads (default: HF_HUB_CACHE)
        default=None,
        metadata=declare(
            "Hugging Face cache folder for downloads (default: $HF_HUB_CACHE)", group=ON_DISK, metavar="DIR"
        ),
    )
    keep_checkpoints: bool = field(  # keep downloaded revisions after scoring
        default=False, metadata=declare("keep downloaded revisions after scoring", group=ON_DISK)
    )
    runner: Runner = field(
        default=Runner.LOCAL,
        metadata=declare(
            "local: one checkpoint at a time, next download overlapped; dask: one task per checkpoint on a Dask "
            "cluster (default: %(default)s)",
            group=EXECUTION,
        ),
    )
    address: str | None = field(  # scheduler of an existing Dask cluster (runner dask)
        default=None,
        metadata=declare("scheduler of an existing Dask cluster (with --runner dask)", group=EXECUTION, metavar="URL"),
    )
    workers: int | None = field(  # workers of a local Dask cluster (runner dask; default 2)
        default=None,
        metadata=declare(
            "workers of a local Dask cluster, with --runner dask (default: 2)", group=EXECUTION, metavar="N"
        ),
    )
    fail_fast: bool = field(  # stop at the first checkpoint that fails (default: record it, go on with the rest)
        default=False,
        metadata=declare(
            "stop at the first checkpoint that cannot be downloaded, loaded or scored (default: record it as failed, "
            "go on with the rest, exit 3)",
            group=EXECUTION,
        ),
    )
    # `--keep-duplicates`: score the branches the integrity audit sets aside (marked); not saved when unset
    keep_duplicates: bool | None = field(
        default=None,
        metadata={
            "omit_unset": True,
            **declare(
                "score the branches the integrity audit sets aside (a full duplicate of another step, a second branch "
                "at one step) and partial duplicates, marked (default: set aside before any download; `dormant "
                "checkpoints --audit` lists them)",
                group=EXECUTION,
            ),
        },
    )
    # the false discovery rate of the heads called to change confident state, and its correction over heads: "bh"
    # (Benjamini-Hochberg), "by" (Benjamini-Yekutieli); None: the stored one, else bh (not saved when unset)
    fdr: float = field(default=FDR, metadata=declare(_FDR))
    fdr_method: str | None = field(default=None, metadata={"omit_unset": True, **declare(_FDR_METHOD)})
    # the family of the report's paired changes' FDR: "pair", "function", "series"; None: pair (not saved when unset)
    paired_fdr: str | None = field(default=None, metadata={"omit_unset": True, **declare(_PAIRED_FDR)})
    report: bool = field(  # render the report at the end
        default=True,
        metadata=declare("do not render the report at the end", flag="--no-report", group=EXECUTION, dest="no_report"),
    )
    reports_dir: str | None = field(default=None, metadata=declare(reports_dir_option().placed(EXECUTION)))

    @classmethod
    def fields_of_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """`dormant track`'s options as `dormant_tasks.track` takes them: `--max-batch-tokens N` is
        `max_batch_tokens=N`, `--no-report` is `no_report=True`, a selection option sets a field of `selection`."""
        selection = {SELECTION_OPTIONS[k]: options.pop(k) for k in list(options) if k in SELECTION_OPTIONS}
        report = options.pop("no_report", None)
        fields = super().fields_of_options(options)
        if options.get("keep_duplicates") is False:
            fields.pop("keep_duplicates")  # unset: not saved, the request id as before the option
        if report is not None:
            fields["report"] = not report
        if any(v is not None for v in selection.values()):
            fields["selection"] = Selection(**{k: v for k, v in selection.items() if v is not None})
        return fields

    @classmethod
    def missing(cls, name: str) -> str:
        return "--model is required: a Hub repo id (e.g. allenai/OLMo-2-0425-1B) or a series folder"

    @classmethod
    def read_fields(cls, data: dict[str, Any]) -> dict[str, Any]:
        return data | {"selection": _selection_of(data["selection"])} if "selection" in data else data

    def __post_init__(self):
        if self.input_scores is None or isinstance(self.input_scores, bool):  # saved before the policy existed
            set_field(self, "input_scores", {True: "keep", False: "drop", None: "auto"}[self.input_scores])
        check_types(self)
        if not self.source.strip():
            raise ConfigError("--model is empty: name a Hub repo id (org/name) or a folder of checkpoint folders")
        if self.series_name is not None:
            check_series_name(self.series_name)
        set_field(self, "source", source_for(self.source).spec)  # a folder: absolute; a Hub id as is
        for name in ("store", "texts", "cache_dir", "reports_dir"):
            set_field(self, name, absolute_path(getattr(self, name)))
        names = (self.calibrations,) if isinstance(self.calibrations, str) else tuple(self.calibrations or ())
        set_field(self, "calibrations", tuple(_calibration_name(n) for n in names))
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
        set_field(self, "score_fns", None if self.score_fns is None else tuple(parse_score_functions(self.score_fns)))
        set_field(self, "taus", tuple(self.taus))
        from dormant_tasks.tracking.masks import parse_tau_option

        fns = self.score_fn_ids
        for t in self.taus:
            spec = parse_tau_option(t)
            if spec.score_fn not in fns:
                raise ConfigError(
                    f"--tau given for {spec.score_fn!r}, which is not among the scored functions; "
                    "add it to --scores or drop the --tau"
                )
        for name in ("tokens_per_step", "limit", "sample", "batch_size", "max_tokens", "max_batch_tokens", "workers"):
            check_positive(getattr(self, name), f"--{name.replace('_', '-')}")
        check_max_tokens(self.max_tokens)
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"--seed must be 0 or more (at most 2**63 - 1), got {self.seed}")
        set_field(self, "dtype", parse_dtype(self.dtype))
        set_field(self, "device", parse_device(self.device))
        set_field(self, "runner", parse_enum(Runner, self.runner, "--runner"))
        set_field(self, "input_scores", parse_enum(InputScoresPolicy, self.input_scores, "--input-scores"))
        if self.runner is Runner.LOCAL and (self.address or self.workers):
            flag = "--address" if self.address else "--workers"
            raise ConfigError(f"{flag} is for a Dask cluster: add --runner dask, or drop {flag}")
        if self.address and self.workers:
            raise ConfigError("--workers sizes a local Dask cluster; with --address the cluster exists: drop --workers")
        if isinstance(self.fdr, bool) or not isinstance(self.fdr, int | float) or not 0 < self.fdr < 1:
            raise ConfigError(f"--fdr {self.fdr}: a false discovery rate lies between 0 and 1 (e.g. {FDR})")
        set_field(self, "fdr", float(self.fdr))
        if self.fdr_method is not None and self.fdr_method not in FDR_METHODS:
            raise ConfigError(
                f"--fdr-method {self.fdr_method!r}: choose one of {', '.join(FDR_METHODS)}"
                f"{did_you_mean(str(self.fdr_method), FDR_METHODS)}"
            )
        if self.paired_fdr is not None and self.paired_fdr not in PAIRED_FDR_FAMILIES:
            raise ConfigError(
                f"--paired-fdr {self.paired_fdr!r}: choose one of {', '.join(PAIRED_FDR_FAMILIES)}"
                f"{did_you_mean(str(self.paired_fdr), PAIRED_FDR_FAMILIES)}"
            )
        self._check_budget()
        if self.reports_dir and not self.report:
            raise ConfigError("--reports-dir with --no-report: drop one of them")

    def _check_budget(self) -> None:
        if self.budget is not None and (isinstance(self.budget, bool) or self.budget < 2):
            raise ConfigError(
                f"--budget {self.budget}: the search scores at least the first and the last checkpoint; give 2 or "
                "more (e.g. --budget 32)"
            )
        if self.resolution is not None:
            if self.budget is None:
                raise ConfigError("--resolution stops the refinement of a --budget run: add --budget N, or drop it")
            if isinstance(self.resolution, bool) or not self.resolution > 0:
                raise ConfigError(f"--resolution {self.resolution}: a ratio above 0 (0.1: stop within 10% in tokens)")
            set_field(self, "resolution", float(self.resolution))
        if self.budget is not None and self.retau:
            raise ConfigError(
                "--budget with --retau: --retau rewrites every stored checkpoint under new taus; run it alone, "
                "then --budget"
            )

    @property
    def model_id(self) -> str:
        return self.series_name or source_for(self.source).name

    @property
    def source_identity(self) -> str:
        return source_for(self.source).identity

    @property
    def score_fn_ids(self) -> tuple[str, ...]:
        return tuple(self.score_fns or TRACKED_IDS)

    @property
    def scoring(self) -> ScoringOptions:
        """What the score engine computes on each checkpoint, and how it cuts and batches the inputs."""
        return ScoringOptions(self.score_fn_ids, self.batch_size, self.max_tokens, self.max_batch_tokens, self.seed)

    @cached_property
    def calibration_sets(self) -> tuple:
        """Every calibration set of the run, the series' primary one first (read once per request object)."""
        from dormant_tasks.tracking.calibration import load_calibration, load_calibration_sets

        if self.calibrations:
            return load_calibration_sets(self.calibrations, self.limit, self.sample, self.cluster_field)
        return (load_calibration(self.texts, self.limit, self.sample, self.cluster_field),)

    @property
    def calibration(self):
        """The primary calibration set (the first; its content hash is the calibration_id)."""
        return self.calibration_sets[0]
