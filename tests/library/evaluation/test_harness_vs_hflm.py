"""DormantLM with nothing zeroed vs lm-eval's stock HFLM on the same tiny checkpoint, item by item.

Both sides run lm-eval 0.4.13's own task definitions on the bundled data (the same TaskManager), so the
requests are identical; HFLM answers with its own batching, padding and caching, DormantLM through the score
engine. Predictions, correctness, summed log-likelihoods (to float32 precision), generated text and the task
accuracy must agree. HFLM with `add_bos_token` unset is the `tokenizer` BOS rule; with `add_bos_token=False`
it is the `paper` rule.
"""

from __future__ import annotations

import lm_eval
import numpy as np
import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.evaluation.lm_tasks import DEFAULT_FEWSHOT_SEED, task_manager
from dormant_tasks.evaluation.request import DataSource
from dormant_tasks.evaluation.sweep import prepare, run_setting
from tests.builders.evaluation import eval_request

pytestmark = pytest.mark.slow
LIMIT = 8


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir):
    return load_model_and_tokenizer(tiny_model_dir, device="cpu")


def _hflm_samples(model, tokenizer, tasks, shots, limit, add_bos_token=None, **kwargs):
    from lm_eval.models.huggingface import HFLM

    extra = {} if add_bos_token is None else {"add_bos_token": add_bos_token}
    results = lm_eval.simple_evaluate(
        model=HFLM(pretrained=model, tokenizer=tokenizer, batch_size=kwargs.pop("batch_size", 16), **extra),
        tasks=list(tasks),
        task_manager=task_manager(DataSource.BUNDLED),
        num_fewshot=shots,
        fewshot_random_seed=DEFAULT_FEWSHOT_SEED,
        limit=limit,
        log_samples=True,
        bootstrap_iters=0,
        **kwargs,
    )
    return results


def _ours(model, tokenizer, task, shots, limit, bos, **kwargs):
    prepared = prepare(
        model,
        tokenizer,
        eval_request(
            task, model=kwargs.pop("model_id", "tiny"), shots=shots, limit=limit, bos=bos, datasets="bundled", **kwargs
        ),
    )
    spec = prepared.specs[0]
    return prepared, run_setting(prepared, spec, None, log_samples=True)


def _compare_items(ours, samples_by_task, metric="acc"):
    n = 0
    for item in ours.items:
        theirs = {s["doc_id"]: s for s in samples_by_task[item["task"]]}[item["doc_id"]]
        lls = [float(r[0]) for r in theirs["filtered_resps"]]
        np.testing.assert_allclose(item["loglikelihoods"], lls, rtol=1e-4, atol=1e-3)
        assert item["prediction"] == str(int(np.argmax(lls)))
        assert item["correct"] == (theirs[metric] == 1.0), (item, theirs[metric])
        n += 1
    return n


@pytest.mark.parametrize(
    "task,shots,leaf_tasks",
    [
        ("winogrande", 5, ["winogrande"]),
        ("mmlu_anatomy,mmlu_astronomy", 5, ["mmlu_anatomy", "mmlu_astronomy"]),
        ("hellaswag", 0, ["hellaswag"]),
        ("piqa", 0, ["piqa"]),
    ],
)
def test_multiple_choice_items_match_hflm(model_and_tokenizer, task, shots, leaf_tasks):
    model, tok = model_and_tokenizer
    theirs = _hflm_samples(model, tok, task.split(","), shots, LIMIT)
    prepared = prepare(
        model, tok, eval_request(task, model="tiny", shots=shots, limit=LIMIT, bos="tokenizer", datasets="bundled")
    )
    for spec in prepared.specs:
        ours = run_setting(prepared, spec, None, log_samples=True)
        assert _compare_items(ours, theirs["samples"]) == LIMIT
        assert ours.accuracy == pytest.approx(theirs["results"][spec.name]["acc,none"])


def test_the_mmlu_group_accuracy_is_lm_evals(model_and_tokenizer):
    model, tok = model_and_tokenizer
    theirs = _hflm_samples(model, tok, ["mmlu"], 0, 2)
    prepared = prepare(
        model, tok, eval_request("mmlu", model="tiny", shots=0, limit=2, bos="tokenizer", datasets="bundled")
    )
    (spec,) = prepared.specs
    assert spec.is_group and len(spec.leaves) == 57 and spec.metric == "acc,none"
    ours = run_setting(prepared, spec, None, log_samples=True)
    assert _compare_items(ours, theirs["samples"]) == 2 * 57
    assert ours.accuracy == pytest.approx(theirs["results"]["mmlu"]["acc,none"])


def test_paper_bos_rule_matches_hflm_without_bos(model_and_tokenizer):
    model, tok = model_and_tokenizer
    theirs = _hflm_samples(model, tok, ["winogrande"], 1, LIMIT, add_bos_token=False)
    _, ours = _ours(model, tok, "winogrande", 1, LIMIT, "paper")
    assert _compare_items(ours, theirs["samples"]) == LIMIT


def test_generation_matches_hflm(model_and_tokenizer):
    model, tok = model_and_tokenizer
    theirs = _hflm_samples(model, tok, ["gsm8k"], 1, 3, batch_size=1, gen_kwargs="max_gen_toks=24")
    prepared = prepare(
        model, tok, eval_request("gsm8k", model="tiny", shots=1, limit=3, bos="tokenizer", datasets="bundled")
    )
    for inst in prepared.instances["gsm8k"]:  # simple_evaluate's gen_kwargs, applied to the built requests
        inst.arguments[1]["max_gen_toks"] = 24
    ours = run_setting(prepared, prepared.specs[0], None, log_samples=True)
    by_doc = {s["doc_id"]: s for s in theirs["samples"]["gsm8k"]}
    for item in ours.items:
        s = by_doc[item["doc_id"]]
        assert item["generated"] == s["resps"][0][0]
        assert item["prediction"] == s["filtered_resps"][0]
        assert item["correct"] == (s["exact_match"] == 1.0)
    assert ours.accuracy == pytest.approx(theirs["results"]["gsm8k"]["exact_match,strict-match"])


@pytest.fixture(scope="module")
def instruct_model(tmp_path_factory, tiny_model_dir):
    """The tiny model saved under an id ending in -Instruct, with a chat template in its tokenizer."""
    model, tok = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    tok.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    folder = tmp_path_factory.mktemp("models") / "tiny-olmo2-Instruct"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return load_model_and_tokenizer(folder, device="cpu")


def test_chat_template_auto_renders_what_lm_eval_renders(instruct_model):
    model, tok = instruct_model
    theirs = _hflm_samples(model, tok, ["winogrande"], 2, 4, apply_chat_template=True, fewshot_as_multiturn=True)
    # --rendering lm-eval is 0.4.13's own chat rendering (the default, paper, is 0.4.5's:
    # tests/integration/test_paper_rendering.py compares it with lm-eval 0.4.5 itself)
    prepared, ours = _ours(
        model, tok, "winogrande", 2, 4, "tokenizer", model_id="org/tiny-olmo2-Instruct", rendering="lm-eval"
    )
    assert prepared.protocol.chat_template
    by_doc = {s["doc_id"]: s for s in theirs["samples"]["winogrande"]}
    for inst in prepared.instances["winogrande"]:
        expected = by_doc[inst.doc_id]["arguments"][inst.idx]
        assert tuple(inst.args) == tuple(expected)  # byte for byte
        assert "<|assistant|>" in inst.args[0] and "<|user|>" in inst.args[0]
    assert _compare_items(ours, theirs["samples"]) == 4

    off, _ = _ours(model, tok, "winogrande", 2, 4, "tokenizer", model_id="org/tiny-olmo2-Instruct", chat_template="off")
    assert not off.protocol.chat_template
    assert all("<|assistant|>" not in inst.args[0] for inst in off.instances["winogrande"])
    base, _ = _ours(model, tok, "winogrande", 2, 4, "tokenizer", model_id="org/tiny-olmo2")  # no -Instruct: auto = off
    assert not base.protocol.chat_template
