"""The drift test of `dormant_tasks/evaluation/lmeval_adapter.py`: the exact shape of every lm-eval internal the
adapter uses (private modules, functions, attributes, index records), read from the installed lm-eval.

A new lm-eval release that renames or reshapes one of them fails here, naming the internal and the adapter
function to fix, instead of deep inside an evaluation run. `make lowest` runs this file under the lowest lm-eval
that pyproject.toml allows. The installed version itself is checked by `check_version` (one line, exit 2).
"""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import lm_eval
import pytest
from packaging.specifiers import SpecifierSet

from dormant_tasks.errors import EvaluationError
from dormant_tasks.evaluation import lmeval_adapter
from dormant_tasks.evaluation.lm_tasks import load_tasks, task_manager
from dormant_tasks.evaluation.request import DataSource

ROOT = Path(lmeval_adapter.__file__).resolve().parents[2]
WHERE = f"lm-eval {lm_eval.__version__}"


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_the_supported_range_is_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = project["optional-dependencies"]["eval"]  # the eval extra: tracking never imports lm-eval
    (declared,) = [re.sub(r"^lm-eval", "", d) for d in deps if d.startswith("lm-eval")]
    assert SpecifierSet(declared) == SpecifierSet(lmeval_adapter.SUPPORTED)


def test_the_installed_lm_eval_is_supported_and_another_is_refused_in_one_line(monkeypatch):
    lmeval_adapter.check_version()
    monkeypatch.setattr(lm_eval, "__version__", "0.4.5")
    with pytest.raises(EvaluationError) as e:
        lmeval_adapter.check_version()
    assert "\n" not in str(e.value) and "lm-eval 0.4.5 is installed" in str(e.value)
    assert f"pip install 'lm-eval{lmeval_adapter.SUPPORTED}'" in str(e.value)


def test_the_private_functions_the_adapter_calls_keep_their_signatures():
    from lm_eval.evaluator_utils import _process_results, get_sample_size
    from lm_eval.tasks._yaml_loader import load_yaml

    assert "resolve_func" in _params(load_yaml), f"{WHERE}: load_yaml(resolve_func=) moved; fix task_yaml"
    assert _params(_process_results) == ["eval_results_acc", "groups", "bootstrap_iters"], (
        f"{WHERE}: _process_results{inspect.signature(_process_results)}; fix aggregate"
    )
    assert len(_params(get_sample_size)) == 2, f"{WHERE}: get_sample_size(task, limit) changed; fix sample_size"


def test_the_instance_record_keeps_its_fields():
    from lm_eval.api.instance import Instance

    assert _params(Instance)[:5] == ["request_type", "doc", "arguments", "idx", "metadata"], (
        f"{WHERE}: Instance{_params(Instance)}; fix make_instances"
    )
    one = Instance("loglikelihood", {}, ("a", " b"), 0, ("t", 0, 1))
    assert one.resps == [] and one.filtered_resps == {}, f"{WHERE}: Instance responses; fix clear/add_response"


def test_the_task_manager_keeps_its_factory_and_index():
    manager = task_manager(DataSource.BUNDLED)
    factory = lmeval_adapter.factory_class(manager)
    assert isinstance(manager._index, dict) and isinstance(manager._factory._meta, dict), (
        f"{WHERE}: TaskManager._index/_factory._meta; fix copy_manager"
    )
    for method, params in (("_build_task", ["entry", "overrides"]), ("_load_full_config", ["entry", "overrides"])):
        assert _params(getattr(factory, method))[1:3] == params, f"{WHERE}: {method}; fix checking_factory"
    index = manager.task_index
    kinds = {name: index[name].kind.name for name in ("winogrande", "mmlu")}
    assert kinds == {"winogrande": "TASK", "mmlu": "GROUP"}, f"{WHERE}: index entry kinds {kinds}; fix task_leaves"
    entry = index["winogrande"]
    for field in ("tags", "cfg", "yaml_path"):
        assert hasattr(entry, field), f"{WHERE}: index entries lack `{field}`; fix task_leaves/_entry_config"
    assert len(lmeval_adapter.task_leaves(manager, "mmlu")) == 57  # the group read through subgroups


def test_a_built_task_keeps_what_the_adapter_reads_and_sets():
    loaded = load_tasks("winogrande", shots=0, data_source="bundled")
    task = loaded.tasks["winogrande"]
    assert isinstance(task._metric_fn_list, dict) and "acc" in task._metric_fn_list, f"{WHERE}: uses_mutual_info"
    assert lmeval_adapter.filter_names(task) == ["none"], f"{WHERE}: Task._filters; fix filter_names"
    items = list(lmeval_adapter.items_with_fewshot(task, 0, 2))
    instances = [i for d, doc, _ in items for i in lmeval_adapter.make_instances(task, d, doc, [("a", " b")])]
    lmeval_adapter.set_instances(task, instances)
    assert task.instances == instances, f"{WHERE}: Task._instances is no longer what `instances` reads; set_instances"
