"""Interventions on lm-eval tasks (docs/SCORES.md §6): DormantLM's answers, zeroing, the sweep, bad input.

Oracles: a plain forward of the model (its default attention, no score engine) on each request alone, for
log-likelihoods and for greedy generation; zeroing by an o_proj forward pre-hook. lm-eval's own tasks
(bundled data, offline) make the requests. The item-by-item comparison with lm-eval's stock HFLM is in
test_harness_vs_hflm.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.engine.score_functions import is_inactive
from dormant_tasks.engine.scoring import DynamicZeroing, StaticZeroing
from dormant_tasks.errors import ConfigError, DormantError, EvaluationError
from dormant_tasks.evaluation.metric import normalised_auc, pct_zeroed_within_1pt, task_average_curve
from dormant_tasks.evaluation.sweep import AVERAGE_TASK, check_tau, evaluate_static, prepare, run_setting, run_sweep
from tests.builders.evaluation import eval_request
from tests.builders.lm_oracle import oracle_items, zeroing_hooks

LIMIT = 6


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir):
    return load_model_and_tokenizer(tiny_model_dir, device="cpu")


@pytest.fixture(scope="module")
def prepared(model_and_tokenizer):
    model, tok = model_and_tokenizer
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        return prepare(
            model,
            tok,
            eval_request(
                "winogrande,mmlu_anatomy",
                model="tiny",
                limit=LIMIT,
                batch_size=5,
                shots=1,
                score_fns=("ahon_ln", "awft"),
            ),
        )


def test_protocol_of_the_prepared_tasks(prepared):
    assert [s.name for s in prepared.specs] == ["winogrande", "mmlu_anatomy"]
    assert {s.name: s.shots for s in prepared.specs} == {"winogrande": 1, "mmlu_anatomy": 1}
    assert prepared.protocol.data_source == "bundled" and prepared.protocol.bos == "paper"
    assert not prepared.protocol.chat_template  # "tiny" has no -Instruct in its id
    assert prepared.n_items == {"winogrande": LIMIT, "mmlu_anatomy": LIMIT}
    assert prepared.chance == {"winogrande": 0.5, "mmlu_anatomy": 0.25}
    # WinoGrande's train split is not bundled: its shots come from the scored split, and the output says so
    assert any("winogrande" in n and "'train' is not bundled" in n for n in prepared.notes)
    assert prepared.loaded.fewshot_split["mmlu_anatomy"] == "dev"


@pytest.mark.parametrize("leaf", ["winogrande", "mmlu_anatomy"])
def test_loglikelihoods_match_one_plain_forward_per_request(model_and_tokenizer, prepared, leaf):
    model, _ = model_and_tokenizer
    spec = prepared.loaded.spec(leaf)
    result = run_setting(prepared, spec, None, keep_scores=True, log_samples=True)
    oracle = oracle_items(model, prepared, leaf)
    assert len(result.items) == LIMIT
    for item in result.items:
        np.testing.assert_allclose(item["loglikelihoods"], oracle[item["doc_id"]], rtol=1e-5, atol=1e-4)
        assert item["prediction"] == str(int(np.argmax(oracle[item["doc_id"]])))
        assert item["correct"] == (item["prediction"] == item["target"])
    assert result.accuracy == pytest.approx(np.mean([i["correct"] for i in result.items]))
    # identical input rows run once: MMLU's four one-token answers share their context's row
    n_requests = sum(1 for _ in prepared.instances[leaf])
    expected_rows = LIMIT if leaf == "mmlu_anatomy" else n_requests
    assert result.record.n_rows == expected_rows and result.frac_zeroed == 0.0


@pytest.mark.parametrize(
    "zeroing", [DynamicZeroing("ahon_ln", 0.0), DynamicZeroing("awft", 1.0), StaticZeroing(frozenset())]
)
def test_zeroing_that_selects_nothing_is_bit_identical(prepared, zeroing):
    spec = prepared.loaded.spec("winogrande")
    base = run_setting(prepared, spec, None, log_samples=True)
    same = run_setting(prepared, spec, zeroing, log_samples=True)
    assert [i["loglikelihoods"] for i in same.items] == [i["loglikelihoods"] for i in base.items]
    assert same.accuracy == base.accuracy and same.frac_zeroed == 0.0


def test_dynamic_frac_zeroed_is_measured_on_the_rows_run(prepared):
    spec = prepared.loaded.spec("mmlu_anatomy")
    base = run_setting(prepared, spec, None, keep_scores=True)
    tau = float(np.quantile(base.record.scores_of("ahon_ln"), 0.2))
    result = run_setting(prepared, spec, DynamicZeroing("ahon_ln", tau), keep_scores=True)
    # each layer zeroed exactly the heads its own recorded (pre-zeroing) scores mark inactive, row by row
    marked = is_inactive(result.record.scores_of("ahon_ln"), tau, "<")  # [rows, layer, head]
    assert result.record.n_zeroed == int(marked.sum()) and result.record.n_slots == marked.size
    assert result.frac_zeroed == pytest.approx(marked.mean()) and 0 < result.frac_zeroed < 1


def test_static_zeroing_matches_the_hook_oracle(model_and_tokenizer, prepared):
    model, _ = model_and_tokenizer
    heads = frozenset({(0, 1), (1, 0), (1, 3)})
    spec = prepared.loaded.spec("winogrande")
    result = run_setting(prepared, spec, StaticZeroing(heads), log_samples=True)
    handles = zeroing_hooks(model, heads)
    try:
        oracle = oracle_items(model, prepared, "winogrande")
    finally:
        for h in handles:
            h.remove()
    for item in result.items:
        np.testing.assert_allclose(item["loglikelihoods"], oracle[item["doc_id"]], rtol=1e-5, atol=1e-4)
    assert result.frac_zeroed == pytest.approx(3 / 8)
    static = evaluate_static(prepared, {"ahon_ln": (heads, 0.5)})
    rows = {r["task"]: r for r in static.rows}
    assert set(rows) == {"winogrande", "mmlu_anatomy"}
    assert rows["winogrande"]["accuracy"] == pytest.approx(result.accuracy)
    assert rows["winogrande"]["frac_zeroed"] == pytest.approx(3 / 8) and rows["winogrande"]["mode"] == "static"


def test_sweep_rows_summaries_and_the_task_average(prepared):
    quantiles = (0.0, 0.1, 0.3)
    sweep = run_sweep(prepared, ["ahon_ln", "awft"], quantiles=quantiles, progress=False, log_samples=True)
    assert len(sweep.rows) == 2 * 2 * len(quantiles)
    assert {r["metric"] for r in sweep.rows} == {"acc,none"}
    assert {r["task"]: r["chance"] for r in sweep.rows} == {"winogrande": 0.5, "mmlu_anatomy": 0.25}
    assert {r["fewshot_split"] for r in sweep.rows if r["task"] == "winogrande"} == {"validation"}
    # base run + every setting logged its items: (1 + 2 functions x 3 quantiles) x 6 items x 2 tasks
    assert len(sweep.items) == (1 + 2 * len(quantiles)) * LIMIT * 2
    for task in ("winogrande", "mmlu_anatomy"):
        for fn, direction in (("ahon_ln", "<"), ("awft", ">")):
            rows = [r for r in sweep.rows if r["score_fn"] == fn and r["task"] == task]
            taus = [r["tau"] for r in rows]
            assert taus == sorted(taus, reverse=(direction == ">"))  # quantile 1-q for ">" functions
            assert rows[0]["frac_zeroed"] == 0.0 and rows[0]["accuracy"] == rows[0]["base_accuracy"]
            assert rows[-1]["frac_zeroed"] > 0
            points = [(100 * r["frac_zeroed"], 100 * r["accuracy"]) for r in rows]
            summary = sweep.summaries[task][fn]
            assert summary.points == tuple(points)
            assert summary.within_1pt == pct_zeroed_within_1pt(points, sweep.base_accuracy[task])
            assert summary.auc == normalised_auc(points)
    for fn in ("ahon_ln", "awft"):
        curves = {t: (quantiles, sweep.summaries[t][fn].points, sweep.base_accuracy[t]) for t in sweep.base_accuracy}
        points, base = task_average_curve(curves)
        assert sweep.summaries[AVERAGE_TASK][fn].points == points
        assert sweep.summaries[AVERAGE_TASK][fn].base_accuracy == pytest.approx(
            np.mean(list(sweep.base_accuracy.values()))
        )
        assert base == sweep.summaries[AVERAGE_TASK][fn].base_accuracy


def test_greedy_generation_matches_a_plain_greedy_loop(model_and_tokenizer):
    model, tok = model_and_tokenizer
    prepared = prepare(model, tok, eval_request("gsm8k", model="tiny", limit=2, shots=1, score_fns=("ahon_ln",)))
    task = prepared.loaded.tasks["gsm8k"]
    task.set_config(key="generation_kwargs", value={"max_gen_toks": 12}, update=True)
    for inst in prepared.instances["gsm8k"]:  # the built requests carry their own copy of the kwargs
        inst.arguments[1]["max_gen_toks"] = 12
    result = run_setting(prepared, prepared.loaded.spec("gsm8k"), None, log_samples=True)
    lm = prepared.lm
    for item, inst in zip(result.items, sorted(prepared.instances["gsm8k"], key=lambda i: i.doc_id)):
        ids = lm.tok_encode(inst.args[0])
        out = []
        for _ in range(12):
            with torch.no_grad():
                token = int(model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax())
            out.append(token)
            if token == tok.eos_token_id:
                break
        text = tok.decode(out, skip_special_tokens=True)
        for stop in inst.args[1]["until"]:
            text = text.split(stop)[0]
        assert item["generated"] == text
    assert result.record.n_rows >= 2  # one forward row per generated token and item


@pytest.mark.slow
def test_bad_input_is_refused_with_a_named_error(model_and_tokenizer, prepared):
    model, tok = model_and_tokenizer
    with pytest.raises(EvaluationError, match='did you mean "winogrande"'):
        prepare(model, tok, eval_request("winogrand", limit=2))
    with pytest.raises(EvaluationError, match="not bundled"):
        prepare(model, tok, eval_request("arc_challenge", limit=2))  # its test split is not bundled and the Hub is off
    with pytest.raises(EvaluationError, match="perplexity"):
        prepare(model, tok, eval_request("wikitext", limit=2))
    with pytest.raises(ConfigError, match="--limit must be a positive integer"):  # the request refuses it
        eval_request("winogrande", limit=0)
    with pytest.raises(EvaluationError, match="no chat template"):
        prepare(model, tok, eval_request("winogrande", limit=2, chat_template="on"))
    with pytest.raises(EvaluationError, match="tokenizer"):
        prepare(model, None, eval_request("winogrande", limit=2))
    with pytest.raises(ConfigError, match="unknown score function"):
        run_sweep(prepared, ["ahon_lm"], progress=False)
    with pytest.raises(EvaluationError, match="quantiles"):
        run_sweep(prepared, ["ahon_ln"], quantiles=(0.1, 1.5), progress=False)
    with pytest.raises(DormantError):
        evaluate_static(prepared, {"ahon_ln": ({(5, 0)}, None)})  # layer 5 of a 2-layer model


@pytest.mark.parametrize(
    "fn,tau",
    [("ahon", -0.1), ("lthon_ln", -1.0), ("awft", 1.2), ("awft", -0.01), ("random", 2.0), ("ahon_ln", float("nan"))],
)
def test_tau_outside_the_function_range(fn, tau):
    with pytest.raises(EvaluationError, match="outside the range"):
        check_tau(fn, tau)


def test_tau_inside_the_range_is_accepted():
    assert check_tau("awft", 1.0) == 1.0 and check_tau("ahon", 12.5) == 12.5 and check_tau("awft_ln", 3.0) == 3.0


@pytest.mark.parametrize(
    ("template", "kind"),
    [
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "SecurityError"),  # the sandbox refuses it
        ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "SecurityError"),
        ("{% for %}", "TemplateSyntaxError"),
        ("{{ raise_exception('no system role') }}", "TemplateError"),
    ],
    ids=["mro", "globals", "syntax", "raises"],
)
def test_a_chat_template_that_cannot_render_is_one_evaluation_error(tiny_model_dir, template, kind):
    """transformers renders chat templates in jinja2's sandbox: what it refuses (or a template that does not parse
    or raises) was a 254-line traceback; now one EvaluationError line naming why and the fix."""
    from transformers import AutoTokenizer

    from dormant_tasks.evaluation.model import render_chat

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = template
    with pytest.raises(EvaluationError) as excinfo:
        render_chat(tokenizer, [{"role": "user", "content": "hi"}])
    message = str(excinfo.value)
    assert "\n" not in message and f"({kind}: " in message and "--chat-template off" in message
