"""Which lm-evaluation-harness tasks an evaluation runs, under which protocol, from which data.

Tasks are lm-eval's own definitions (prompts, few-shot samplers, filters, metrics), loaded by its
`TaskManager`; any task, group or tag name works. The protocol defaults are the paper authors' (docs/SCORES.md
§6): `PAPER_SHOTS` few-shot examples per task (lm-eval's task default otherwise), a chat template for a model
whose id marks it as chat-tuned (`CHAT_MODEL_MARKERS`), and `Bos.PAPER`.

Data: from the Hub as lm-eval loads it, or (`DataSource.BUNDLED`, the default when `HF_DATASETS_OFFLINE` or
`HF_HUB_OFFLINE` is set) from the copies bundled with this package (`dormant_tasks.bundled`): only the
dataset's location is overridden. A split a task needs for its scored items that is not bundled is an error;
a missing few-shot split (e.g. WinoGrande's train) falls back to the scored split with the scored item left
out of its own shots, as lm-eval does when the two splits are one, and `LoadedTasks.notes` says so.

Public API
- `load_tasks(names, *, shots=None, data_source=DataSource.AUTO, fewshot_seed=1234) -> LoadedTasks`
- `check_task_names(names)` (unknown names, with lm-eval's close matches), `split_task_names(text)`,
  `wants_chat_template(model_id, setting, tokenizer) -> bool`,
  `resolve_data_source(setting) -> DataSource`
"""

from __future__ import annotations

import functools
import os
import random
from dataclasses import dataclass, field

import numpy as np

from .errors import EvaluationError, did_you_mean
from .requests import ChatTemplate, DataSource

PAPER_SHOTS = {"winogrande": 5, "mmlu": 5, "gsm8k": 5, "piqa": 0}  # the authors' runs; other tasks: lm-eval's
CHAT_MODEL_MARKERS = ("-Instruct", "-chat", "-SFT", "-DPO")  # the authors' rule for applying a chat template
DEFAULT_FEWSHOT_SEED = 1234  # lm-eval's fewshot_random_seed


def split_task_names(text) -> tuple[str, ...]:
    """ "winogrande,mmlu" or ["winogrande", "mmlu"] -> ("winogrande", "mmlu"), duplicates dropped, order kept."""
    parts = text.split(",") if isinstance(text, str) else [p for t in text for p in str(t).split(",")]
    names = tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))
    if not names:
        raise EvaluationError("no task given; name an lm-eval task, e.g. --task winogrande or --task mmlu,piqa")
    return names


def resolve_data_source(setting: DataSource | str) -> DataSource:
    setting = DataSource(setting)
    if setting is not DataSource.AUTO:
        return setting
    offline = any(
        os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
    )
    return DataSource.BUNDLED if offline else DataSource.HUB


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


def _bundled_factory(base_cls, fallbacks: dict, missing: list):
    """lm-eval's TaskFactory with each task's dataset location pointed at the bundled copy."""

    class BundledTaskFactory(base_cls):
        def _build_task(self, entry, overrides):
            cfg = self._load_full_config(entry, overrides)
            return super()._build_task(entry, {**(overrides or {}), **_bundled_overrides(cfg, fallbacks, missing)})

    return BundledTaskFactory


def _bundled_overrides(cfg: dict, fallbacks: dict, missing: list) -> dict:
    from .bundled import bundled_dataset

    name, path, dname = cfg.get("task"), cfg.get("dataset_path"), cfg.get("dataset_name")
    _refuse_perplexity(name, cfg.get("output_type"))
    data = bundled_dataset(path, dname) if path else None
    if data is None:
        missing.append(f"{name} (dataset {path}{'/' + dname if dname else ''})")
        return {}
    have = set(data.splits)
    eval_split = cfg.get("test_split") or cfg.get("validation_split")
    if eval_split not in have:
        missing.append(f"{name} (split {eval_split!r} of {path}; bundled: {', '.join(sorted(have))})")
        return {}
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
    filters = [f.name for f in getattr(task, "_filters", [])] or ["none"]
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
    from lm_eval.tasks import TaskManager

    return frozenset(TaskManager().all_tasks)


def task_manager(data_source: DataSource, fallbacks: dict | None = None, missing: list | None = None):
    from lm_eval.tasks import TaskManager

    manager = TaskManager()
    if data_source is DataSource.BUNDLED:
        manager._factory = _bundled_factory(
            type(manager._factory), fallbacks if fallbacks is not None else {}, missing if missing is not None else []
        )(meta=manager._factory._meta)
    return manager


def load_tasks(
    names,
    *,
    shots: int | None = None,
    data_source: DataSource | str = DataSource.AUTO,
    fewshot_seed: int = DEFAULT_FEWSHOT_SEED,
) -> LoadedTasks:
    """Load lm-eval's tasks `names` with the protocol's few-shot counts; EvaluationError for an unknown name,
    a split that is neither bundled nor (with the Hub off) reachable, or a task this evaluation cannot run."""
    names = split_task_names(names)
    source = resolve_data_source(data_source)
    if shots is not None and (not isinstance(shots, int) or shots < 0):
        raise EvaluationError(f"--shots must be 0 or more, got {shots!r}")
    random.seed(0)  # lm-eval's simple_evaluate seeds: python 0, numpy 1234 (some tasks shuffle their docs)
    np.random.seed(1234)
    fallbacks: dict = {}
    missing: list = []
    manager = task_manager(source, fallbacks, missing)
    check_task_names(names, manager.all_tasks)
    specs, tasks, groups = [], {}, {}
    for name in names:
        missing.clear()
        try:
            loaded = manager.load(name)
        except EvaluationError:
            raise
        except Exception as e:  # noqa: BLE001 - lm-eval/datasets raise many kinds; the user gets one line
            if missing:
                break
            hint = (
                " (the Hub is not reachable? add --datasets bundled, or set HF_DATASETS_OFFLINE=1)"
                if source is DataSource.HUB
                else ""
            )
            raise EvaluationError(f"task {name!r} could not be loaded: {type(e).__name__}: {e}{hint}") from None
        if missing:
            break
        leaves = tuple(loaded["tasks"])
        for leaf in leaves:
            if leaf in tasks:
                raise EvaluationError(f"task {leaf!r} is named twice (through {name!r}); name each task once")
        spec = _configure(name, loaded, shots, fewshot_seed)
        specs.append(spec)
        tasks.update(loaded["tasks"])
        groups.update(loaded["groups"])
    if missing:
        raise EvaluationError(
            f"{missing[0]} is not bundled with dormant-heads, and --datasets bundled (or HF_DATASETS_OFFLINE) keeps "
            "the Hub off; run where the Hub is reachable with --datasets hub, or pick a bundled task "
            "(winogrande, mmlu, hellaswag, piqa, gsm8k)"
        )
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


def _collapse(notes: list[str]) -> list[str]:
    """One note per distinct message once the leaf name is removed (57 MMLU subjects say the same)."""
    seen: dict[str, list[str]] = {}
    for n in notes:
        leaf, msg = n.split(": ", 1)
        seen.setdefault(msg, []).append(leaf)
    return [
        f"{', '.join(leaves) if len(leaves) <= 3 else f'{len(leaves)} tasks'}: {msg}" for msg, leaves in seen.items()
    ]


def _configure(name: str, loaded: dict, shots: int | None, fewshot_seed: int) -> TaskSpec:
    """Few-shot count and seed on every leaf, as lm-eval's simple_evaluate sets them."""
    wanted = shots if shots is not None else PAPER_SHOTS.get(name)
    leaves = loaded["tasks"]
    counts = set()
    for task in leaves.values():
        _refuse_perplexity(name, task.get_config("output_type"))
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
