"""The one place that touches lm-evaluation-harness internals (attributes and functions outside its public API).

Written against lm-eval `SUPPORTED` (pyproject's range); `check_version` refuses another version in one line, and
`tests/library/evaluation/test_lmeval_adapter_drift.py` pins the shape of every internal used here. The rest of
`dormant_tasks.evaluation` calls lm-eval's public surface and these functions.
"""

from __future__ import annotations

import copy

from dormant_tasks.errors import EvaluationError
from dormant_tasks.extras import require_extra

SUPPORTED = ">=0.4.12,<0.5"  # pyproject.toml's range for lm-eval (a test keeps the two equal)


def check_version() -> None:
    require_extra("eval", "evaluation under lm-eval")  # the core install leaves lm-eval out
    import lm_eval
    from packaging.specifiers import SpecifierSet

    if lm_eval.__version__ not in SpecifierSet(SUPPORTED):
        raise EvaluationError(
            f"lm-eval {lm_eval.__version__} is installed; dormant-heads supports lm-eval{SUPPORTED}: "
            f"pip install 'lm-eval{SUPPORTED}'"
        )


# ------------------------------------------------------------------------------------------ requests


def items_with_fewshot(task, shots: int, limit: int | None, seed: int | None = None):
    """(doc_id, doc, few-shot docs) for the first `limit` items, the few-shot docs drawn by the task's sampler
    exactly as its `fewshot_context` draws them (the scored item left out when few-shot and scored split are
    one), from a sampler re-seeded with `seed` (the task's fewshot seed when None)."""
    if seed is not None:
        task.set_fewshot_seed(seed=seed)
    same_split = task.fewshot_cfg.split == task.config.test_split
    for doc_id, doc in task.doc_iterator(rank=0, limit=limit, world_size=1):
        fewshot = task.sampler.sample(n=shots, eval_doc=doc if same_split else None) if shots > 0 else []
        yield doc_id, doc, list(fewshot)


def make_instances(task, doc_id: int, doc, arguments: list[tuple]) -> list:
    """lm-eval Instances of one item: one loglikelihood request per argument pair of a multiple-choice task
    (`idx` = choice), else one request of the task's output type."""
    from lm_eval.api.instance import Instance

    output_type = task.config.output_type
    meta = (task.config.task, doc_id, task.config.repeats)
    if output_type == "multiple_choice":
        return [Instance("loglikelihood", doc, arg, i, meta) for i, arg in enumerate(arguments)]
    return [Instance(output_type, doc, arguments[0], 0, meta)]


def set_instances(task, instances: list) -> None:
    """Make `instances` the task's requests (what `build_all_requests` stores; `apply_filters` reads them)."""
    if not instances:
        raise EvaluationError(f"task {task.config.task} has no items to evaluate; check --limit and the split")
    task._instances = list(instances)


def filter_names(task) -> list[str]:
    """The names of the task's filter pipelines, in order (the first is its primary metric's)."""
    return [f.name for f in getattr(task, "_filters", [])]


def task_yaml(path) -> dict:
    """A task or group YAML as lm-eval reads it, its `!function` tags left unresolved."""
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(path, resolve_func=False)


def uses_mutual_info(task) -> bool:
    return "acc_mutual_info" in task._metric_fn_list


# ------------------------------------------------------------------------------------------ answers


def clear_responses(instance) -> None:
    instance.resps = []
    instance.filtered_resps = {}


def add_response(instance, response) -> None:
    instance.resps.append(response)


def sample_size(task, limit: int | None):
    """How many of `task`'s documents lm-eval evaluates under `--limit` (a count, or a fraction of the set)."""
    from lm_eval.evaluator_utils import get_sample_size

    return get_sample_size(task, limit)


def aggregate(accs: dict, groups: dict):
    """lm-eval's aggregation of per-task raw metrics into task and group values (group sizes weighted)."""
    from lm_eval.evaluator_utils import _process_results

    return _process_results(accs, groups, bootstrap_iters=0)


# ------------------------------------------------------------------------------------------ task index


def factory_class(manager):
    """The class of a TaskManager's task factory (what builds a task from its config)."""
    return type(manager._factory)


def checking_factory(base_cls, check):
    """A subclass of the task factory `base_cls` that reads each task's full config before building it and calls
    `check(config) -> overrides`: `check` raises to refuse the task (nothing is built, so nothing downloaded),
    and the overrides it returns are merged into the task's config."""

    class CheckedTaskFactory(base_cls):
        def _build_task(self, entry, overrides):
            extra = check(self._load_full_config(entry, overrides))
            return super()._build_task(entry, {**(overrides or {}), **extra} if extra else overrides)

    return CheckedTaskFactory


def copy_manager(manager, factory_cls):
    """A shallow copy of a TaskManager with its own index (lm-eval adds names to it as it builds groups) and a
    task factory of class `factory_cls`."""
    out = copy.copy(manager)
    out._index = dict(manager._index)
    out._factory = factory_cls(meta=manager._factory._meta)
    return out


def task_leaves(manager, name: str) -> set[str]:
    """The names of the tasks lm-eval builds for the task, group or tag `name`, read from a TaskManager's index
    (its `Entry` records: kind, tags, config or YAML) without building anything: a group's `task:` list, through
    subgroups and tags, transitively; a task that is not in the index is named `group::task`, as lm-eval names
    such inline tasks. An unknown name has none."""
    index = manager.task_index
    leaves: set[str] = set()
    seen: set[str] = set()

    def entry_leaves(entry_name: str) -> None:
        entry = index.get(entry_name)
        if entry is None:
            return
        kind = entry.kind.name
        if kind == "TAG":
            leaves.update(t for t in entry.tags if t in index)
        elif kind != "GROUP":
            leaves.add(entry_name)
        elif entry_name not in seen:
            seen.add(entry_name)
            members(_entry_config(entry).get("task"), entry_name)

    def members(items, group_name: str) -> None:
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and "group" in item:
                ref = item["group"]
                if ref in index:
                    entry_leaves(ref)
                else:  # an inline subgroup
                    members(item.get("task"), f"{group_name}::{ref}")
                continue
            ref = item.get("task") if isinstance(item, dict) else item
            if not isinstance(ref, str):
                continue
            if ref in index:
                entry_leaves(ref)
            else:  # an inline task
                leaves.add(f"{group_name}::{ref}")

    entry_leaves(name)
    return leaves


def _entry_config(entry) -> dict:
    """An index entry's config: parsed already, else read from its YAML (functions unresolved)."""
    if entry.cfg is not None:
        return entry.cfg
    return task_yaml(entry.yaml_path) if entry.yaml_path else {}
