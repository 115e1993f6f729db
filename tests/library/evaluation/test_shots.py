"""The protocol's few-shot counts (docs/SCORES.md §6) as lm-eval's tasks get them on the bundled data, and the
data-source checks made before lm-eval builds a task (building one downloads its dataset). No model runs: the
counts are set when the tasks are loaded."""

from __future__ import annotations

import datasets
import pytest

from dormant_tasks.errors import EvaluationError
from dormant_tasks.evaluation.lm_tasks import load_tasks, paper_default_shots, task_manager
from dormant_tasks.evaluation.lmeval_adapter import task_leaves
from dormant_tasks.evaluation.request import DataSource


def _spec_shots(loaded) -> dict[str, int]:
    return {s.name: s.shots for s in loaded.specs}


def _leaf_shots(loaded) -> set[int]:
    return {task.get_config("num_fewshot") for task in loaded.tasks.values()}


@pytest.mark.slow
def test_the_authors_counts_by_default():
    loaded = load_tasks("winogrande,mmlu,gsm8k,piqa,hellaswag", data_source="bundled")
    assert _spec_shots(loaded) == {"winogrande": 5, "mmlu": 5, "gsm8k": 5, "piqa": 0, "hellaswag": 0}
    subjects = loaded.spec("mmlu").leaves
    assert len(subjects) == 57 and {loaded.tasks[t].get_config("num_fewshot") for t in subjects} == {5}
    # hellaswag is not one of the authors' tasks: lm-eval's own default, which its config leaves unset (so 0, as
    # lm-eval's simple_evaluate sets it)
    assert "num_fewshot" not in task_manager(DataSource.BUNDLED).task_index["hellaswag"].cfg


@pytest.mark.slow
def test_every_task_inside_the_mmlu_group_is_5_shot_alone_too():
    # a subject, a subgroup and a tag of subjects, each requested without the `mmlu` group the authors ran
    loaded = load_tasks("mmlu_anatomy,mmlu_social_sciences,mmlu_humanities_tasks", data_source="bundled")
    assert _spec_shots(loaded) == {"mmlu_anatomy": 5, "mmlu_social_sciences": 5, "mmlu_humanities_tasks": 5}
    assert _leaf_shots(loaded) == {5}
    # an explicit --shots wins, for a subject as for the group
    assert _spec_shots(load_tasks("mmlu_anatomy", shots=2, data_source="bundled")) == {"mmlu_anatomy": 2}
    zero = load_tasks("mmlu", shots=0, data_source="bundled")
    assert _spec_shots(zero) == {"mmlu": 0} and _leaf_shots(zero) == {0}


def test_membership_is_lm_evals_group_structure():
    manager = task_manager(DataSource.HUB)
    mmlu, stem = task_leaves(manager, "mmlu"), task_leaves(manager, "mmlu_stem")
    assert len(mmlu) == 57 and "mmlu_anatomy" in stem and stem < mmlu
    assert task_leaves(manager, "mmlu_anatomy") == {"mmlu_anatomy"}  # a task is its own only member
    assert task_leaves(manager, "mmlu_humanities_tasks") < mmlu  # a tag: its tasks
    assert task_leaves(manager, "no_such_task") == set()
    defaults = paper_default_shots(manager)
    assert set(defaults) == mmlu | {"winogrande", "gsm8k", "piqa"}
    assert {defaults[t] for t in mmlu} == {5} and defaults["piqa"] == 0
    # not a name prefix: lm-eval's other MMLU variants are groups of their own, outside `mmlu`
    variants = ("mmlu_anatomy_continuation", "mmlu_anatomy_generative", "mmlu_flan_n_shot_loglikelihood_anatomy")
    assert all(v in manager.all_tasks and v not in defaults for v in variants)


@pytest.fixture
def load_dataset_calls(monkeypatch):
    """The dataset path of every datasets.load_dataset call (how lm-eval's tasks fetch their data)."""
    calls = []
    real = datasets.load_dataset

    def spy(path, *args, **kwargs):
        calls.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", spy)
    return calls


@pytest.mark.slow
def test_a_task_not_bundled_is_refused_before_lm_eval_builds_it(monkeypatch, load_dataset_calls):
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)  # as with the Hub reachable: only the option decides
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(EvaluationError) as err:
        load_tasks("winogrande,arc_challenge", data_source="bundled")
    message = str(err.value)
    assert message.startswith("arc_challenge (dataset allenai/ai2_arc/ARC-Challenge) is not bundled")
    assert "under --datasets bundled lm-eval stays off the Hub (nothing was downloaded)" in message
    assert load_dataset_calls == ["parquet"]  # winogrande's bundled files; arc's dataset never asked for
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(EvaluationError, match="under --datasets auto with HF_DATASETS_OFFLINE set lm-eval stays off"):
        load_tasks("arc_challenge")
    assert load_dataset_calls == ["parquet"]


def test_a_hub_error_is_one_line(monkeypatch):
    def unreachable(path, *args, **kwargs):  # datasets' errors span lines; this first line is too long as well
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub {'x' * 400}\nsecond line\n  third line")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(EvaluationError) as err:
        load_tasks("arc_challenge", data_source="hub")
    message = str(err.value)
    assert "\n" not in message and len(message) < 500, message
    assert message.startswith("task 'arc_challenge' could not be loaded: ConnectionError: Couldn't reach 'allenai/")
    assert "x..." in message and message.endswith(
        "(is the Hub reachable? Without it, --datasets bundled serves winogrande, mmlu, hellaswag, piqa, gsm8k)"
    )
