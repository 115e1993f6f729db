"""Cross-check against the reference harness: lm-evaluation-harness's own winogrande task, run offline.

The task is lm-eval's installed `winogrande/default.yaml` (its doc_to_text / doc_to_target /
doc_to_choice), included by a small YAML that only swaps the Hub dataset for the bundled dev set
(a local jsonl) and makes the dev split the few-shot split with the scored item excluded. Both sides
score the same tiny random-init OLMo-2; predictions must agree item by item.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dormant_tasks.calibration import load_winogrande_items
from dormant_tasks.evaluation import evaluate_winogrande
from dormant_tasks.loading import load_model_and_tokenizer
from dormant_tasks.winogrande import DEFAULT_FEWSHOT_SEED, winogrande_requests

lm_eval = pytest.importorskip("lm_eval", reason="lm-evaluation-harness is not installed (pip install lm-eval)")
pytest.importorskip("lm_eval.models.huggingface", reason="lm-eval's HF backend needs accelerate")

pytestmark = pytest.mark.slow

TASK = "winogrande_bundled_dev"


@pytest.fixture(scope="module")
def harness_task_dir(tmp_path_factory):
    """A task folder whose YAML includes lm-eval's own winogrande definition, data swapped for the bundled dev set."""
    folder = tmp_path_factory.mktemp("lm-eval-task")
    data = folder / "winogrande_dev.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in load_winogrande_items()), encoding="utf-8")
    default_yaml = Path(lm_eval.__file__).parent / "tasks" / "winogrande" / "default.yaml"
    (folder / f"{TASK}.yaml").write_text(
        f"include: {default_yaml}\n"
        f"task: {TASK}\n"
        "dataset_path: json\n"
        "dataset_name: null\n"
        "dataset_kwargs:\n"
        f"  data_files:\n    validation: {data}\n"
        f"  cache_dir: {folder / 'hf-datasets-cache'}\n"
        "training_split: null\n"
        # the dev split is also the test and few-shot split, so lm-eval leaves the scored item out of its shots
        "test_split: validation\n"
        "fewshot_split: validation\n",
        encoding="utf-8",
    )
    return folder


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No network here: lm-eval and datasets must not try the Hub."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir):
    return load_model_and_tokenizer(tiny_model_dir, device="cpu")


def _harness_samples(model, tokenizer, task_dir, shots: int, limit: int | None) -> list[dict]:
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    results = lm_eval.simple_evaluate(
        model=HFLM(pretrained=model, tokenizer=tokenizer, batch_size=32),
        tasks=[TASK],
        task_manager=TaskManager(include_path=str(task_dir)),
        num_fewshot=shots,
        fewshot_random_seed=DEFAULT_FEWSHOT_SEED,
        limit=limit,
        log_samples=True,
    )
    return sorted(results["samples"][TASK], key=lambda s: s["doc_id"])


def _compare(model, tokenizer, task_dir, shots: int, limit: int | None):
    samples = _harness_samples(model, tokenizer, task_dir, shots, limit)
    requests = winogrande_requests(load_winogrande_items(), shots=shots, seed=DEFAULT_FEWSHOT_SEED, limit=limit)
    ours = evaluate_winogrande(model, tokenizer, requests, batch_size=32)
    assert [s["doc_id"] for s in samples] == list(range(len(requests)))
    for s, r in zip(samples, requests):
        assert [tuple(a) for a in s["arguments"]] == [(ctx, r.continuation) for ctx in r.contexts]
    harness_ll = np.array([[resp[0][0] for resp in s["resps"]] for s in samples])  # [item, option]
    np.testing.assert_allclose(ours.loglikelihoods, harness_ll, rtol=0, atol=2e-3)
    harness_pred = harness_ll.argmax(1)
    np.testing.assert_array_equal(ours.predictions, harness_pred)
    harness_acc = 100 * np.mean([s["acc"] for s in samples])
    assert ours.accuracy == pytest.approx(harness_acc, abs=1e-9)
    return ours


def test_zero_shot_matches_lm_eval_on_the_whole_dev_set(model_and_tokenizer, harness_task_dir):
    model, tok = model_and_tokenizer
    ours = _compare(model, tok, harness_task_dir, shots=0, limit=None)
    assert ours.n_items == 1267


def test_five_shot_prompts_and_predictions_match_lm_eval(model_and_tokenizer, harness_task_dir):
    model, tok = model_and_tokenizer
    _compare(model, tok, harness_task_dir, shots=5, limit=40)
