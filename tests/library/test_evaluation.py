"""WinoGrande partial evaluation, batched log-likelihood, zeroing integration and the sweep (docs/SCORES.md §6).

Oracles: a plain forward of the model (its default attention) on each sequence alone, and zeroing by an
o_proj forward pre-hook, both independent of the score engine's attention function.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dormant_tasks.calibration import load_winogrande_items
from dormant_tasks.errors import ConfigError, DormantError, EvaluationError
from dormant_tasks.evaluation import (
    DEFAULT_QUANTILES,
    check_tau,
    encode_requests,
    evaluate_static,
    evaluate_winogrande,
    normalised_auc,
    pct_zeroed_within_1pt,
    run_sweep,
)
from dormant_tasks.loading import load_model_and_tokenizer
from dormant_tasks.score_functions import is_inactive
from dormant_tasks.scoring import DynamicZeroing, StaticZeroing, scoring_pass
from dormant_tasks.winogrande import encode_option, fewshot_example, sample_shots, winogrande_requests

N_ITEMS = 24


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir):
    return load_model_and_tokenizer(tiny_model_dir, device="cpu")


@pytest.fixture(scope="module")
def items():
    return load_winogrande_items()


@pytest.fixture(scope="module")
def requests(items):
    return winogrande_requests(items, shots=0, limit=N_ITEMS)


@pytest.fixture(scope="module")
def base(model_and_tokenizer, requests):
    model, tok = model_and_tokenizer
    return evaluate_winogrande(model, tok, requests, score_fns=("ahon_ln", "awft"), batch_size=8)


# --- requests -----------------------------------------------------------------------------------------


def test_partial_evaluation_strings():
    item = {
        "sentence": "The cup fit in the bag because _ was small. ",
        "option1": "the cup",
        "option2": "the bag",
        "answer": "2",
    }
    (r,) = winogrande_requests([item])
    assert r.contexts == ("The cup fit in the bag because the cup", "The cup fit in the bag because the bag")
    assert r.continuation == " was small."
    assert r.label == 1


def test_fewshot_examples_exclude_the_scored_item_and_are_seeded(items):
    shots = sample_shots(items[:50], 5, seed=7)
    assert all(len(s) == 5 and i not in s and len(set(s)) == 5 for i, s in enumerate(shots))
    assert shots == sample_shots(items[:50], 5, seed=7)
    assert shots != sample_shots(items[:50], 5, seed=8)


def test_fewshot_prompt_format(items):
    (r,) = winogrande_requests(items[:10], shots=2, seed=3, limit=1)
    first, second = sample_shots(items[:10], 2, seed=3)[0]
    prefix = fewshot_example(items[first]) + fewshot_example(items[second])
    head = items[0]["sentence"].split("_")[0]
    assert r.contexts == (prefix + head + items[0]["option1"], prefix + head + items[0]["option2"])
    solved = items[first]["sentence"].replace("_", items[first]["option" + items[first]["answer"]])
    assert fewshot_example(items[first]) == solved.strip() + "\n\n"


def test_identical_copies_of_the_item_are_never_shots():
    item = {"sentence": "A _ b.", "option1": "x", "option2": "y", "answer": "1"}
    other = {"sentence": "C _ d.", "option1": "x", "option2": "y", "answer": "2"}
    pool = [item, dict(item), other, dict(other), {**other, "answer": "1"}]
    for i, shots in enumerate(sample_shots(pool, 2, seed=0)):
        assert all(pool[j] != pool[i] for j in shots)


def test_encoding_splits_the_joined_text(tiny_tokenizer):
    enc = encode_option(tiny_tokenizer, "The cup fit in the bag because the cup ", "was small.")
    whole = tiny_tokenizer.encode("The cup fit in the bag because the cup was small.")
    # trailing space moved to the continuation; the model sees everything but the last token
    assert enc.input_ids == tuple(whole[:-1])
    assert tuple(whole[enc.n_context :]) == enc.continuation_ids
    assert enc.n_context == len(tiny_tokenizer.encode("The cup fit in the bag because the cup"))


def test_batches_hold_whole_items(model_and_tokenizer, requests):
    _, tok = model_and_tokenizer
    encoded = encode_requests(tok, requests, batch_size=5)  # 5 sequences -> 2 items per pass
    assert [b.input_ids.shape[0] for b in encoded.batches] == [4] * (N_ITEMS // 2)
    assert all(b.first_input % 2 == 0 for b in encoded.batches)


# --- log-likelihood -----------------------------------------------------------------------------------


def _brute_force_loglikelihoods(model, tok, requests) -> np.ndarray:
    """[item, option]: each (context + continuation) alone through the plain model, summed log-softmax."""
    out = np.zeros((len(requests), 2))
    with torch.no_grad():
        for i, r in enumerate(requests):
            for c, ctx in enumerate(r.contexts):
                n_ctx = len(tok.encode(ctx))
                whole = tok.encode(ctx + r.continuation)
                logp = torch.log_softmax(model(torch.tensor([whole])).logits[0].double(), -1)  # [seq, vocab]
                out[i, c] = sum(logp[t - 1, whole[t]].item() for t in range(n_ctx, len(whole)))
    return out


def test_loglikelihood_equals_brute_force(model_and_tokenizer, requests, base):
    model, tok = model_and_tokenizer
    oracle = _brute_force_loglikelihoods(model, tok, requests)
    np.testing.assert_allclose(base.loglikelihoods, oracle, rtol=0, atol=1e-4)
    assert base.accuracy == pytest.approx(100 * np.mean(oracle.argmax(1) == [r.label for r in requests]))


def test_batched_equals_unbatched(model_and_tokenizer, requests, base):
    model, tok = model_and_tokenizer
    one = evaluate_winogrande(model, tok, requests, score_fns=("ahon_ln", "awft"), batch_size=2)
    np.testing.assert_allclose(one.loglikelihoods, base.loglikelihoods, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(one.predictions, base.predictions)
    np.testing.assert_allclose(one.scores, base.scores, rtol=1e-5, atol=1e-7)


def test_base_run_zeroes_nothing(base):
    assert base.scores.shape[:2] == (2 * N_ITEMS, 2)
    assert not base.zeroed.any() and base.pct_zeroed == 0.0


# --- zeroing ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "zeroing", [DynamicZeroing("ahon_ln", 0.0), DynamicZeroing("awft", 1.0), StaticZeroing(frozenset())]
)
def test_zeroing_that_selects_nothing_is_bit_identical(model_and_tokenizer, requests, base, zeroing):
    model, tok = model_and_tokenizer
    batch = encode_requests(tok, requests, batch_size=8).batches[0]
    plain = scoring_pass(model, batch.input_ids, batch.attention_mask, ("ahon_ln",))
    zeroed = scoring_pass(model, batch.input_ids, batch.attention_mask, ("ahon_ln",), zeroing=zeroing)
    assert torch.equal(plain.logits, zeroed.logits)
    result = evaluate_winogrande(model, tok, requests, zeroing=zeroing, score_fns=("ahon_ln", "awft"), batch_size=8)
    np.testing.assert_array_equal(result.loglikelihoods, base.loglikelihoods)
    assert result.accuracy == base.accuracy and result.pct_zeroed == 0.0


def test_dynamic_pct_zeroed_is_measured(model_and_tokenizer, requests, base):
    model, tok = model_and_tokenizer
    tau = float(np.quantile(base.scores_of("ahon_ln"), 0.2))
    result = evaluate_winogrande(
        model, tok, requests, zeroing=DynamicZeroing("ahon_ln", tau), score_fns=("ahon_ln",), batch_size=8
    )
    n_inputs, n_layers, n_heads = result.zeroed.shape
    per_layer = [
        sum(bool(result.zeroed[i, layer, h]) for i in range(n_inputs) for h in range(n_heads)) / (n_inputs * n_heads)
        for layer in range(n_layers)
    ]
    assert result.pct_zeroed == pytest.approx(100 * sum(per_layer) / n_layers, abs=1e-12)
    assert 0 < result.pct_zeroed < 100
    # each layer zeroed exactly the heads its own recorded (pre-zeroing) scores mark inactive
    np.testing.assert_array_equal(result.zeroed, is_inactive(result.scores_of("ahon_ln"), tau, "<"))


def _hooked_loglikelihoods(model, tok, requests, heads) -> np.ndarray:
    """Oracle for static zeroing: an o_proj pre-hook zeroes the heads' input slices, plain forward."""
    layers = model.model.layers
    d_head = model.config.hidden_size // model.config.num_attention_heads

    def hook_for(layer):
        def hook(module, args):
            x = args[0].clone()  # [batch, seq, head * d_head]
            for zeroed_layer, h in heads:
                if zeroed_layer == layer:
                    x[..., h * d_head : (h + 1) * d_head] = 0
            return (x,)

        return hook

    handles = [layers[i].self_attn.o_proj.register_forward_pre_hook(hook_for(i)) for i in range(len(layers))]
    try:
        return _brute_force_loglikelihoods(model, tok, requests)
    finally:
        for h in handles:
            h.remove()


def test_static_zeroing_matches_hook_oracle(model_and_tokenizer, requests, base):
    model, tok = model_and_tokenizer
    heads = frozenset({(0, 1), (1, 0), (1, 3)})
    result = evaluate_winogrande(model, tok, requests, zeroing=StaticZeroing(heads), batch_size=8)
    oracle = _hooked_loglikelihoods(model, tok, requests, heads)
    np.testing.assert_allclose(result.loglikelihoods, oracle, rtol=0, atol=1e-4)
    assert not np.allclose(result.loglikelihoods, base.loglikelihoods, atol=1e-3)  # the zeroing did something
    assert result.pct_zeroed == pytest.approx(100 * 3 / 8)

    row = evaluate_static(model, tok, heads, score_fn="ahon_ln", tau=0.5, limit=N_ITEMS, batch_size=8)
    assert row["mode"] == "static" and row["quantile"] is None and row["tau"] == 0.5
    # rows are in the store's units: fractions in [0, 1]
    assert row["accuracy"] == pytest.approx(result.accuracy / 100)
    assert row["base_accuracy"] == pytest.approx(base.accuracy / 100)
    assert row["frac_zeroed"] == pytest.approx(3 / 8) and row["n_items"] == N_ITEMS


# --- the sweep ----------------------------------------------------------------------------------------


def test_sweep_rows_and_summaries(model_and_tokenizer, base):
    model, tok = model_and_tokenizer
    sweep = run_sweep(model, tok, ["ahon_ln", "awft"], limit=N_ITEMS, batch_size=8, progress=False)
    assert sweep.base_accuracy == base.accuracy and sweep.n_items == N_ITEMS
    assert len(sweep.rows) == 2 * len(DEFAULT_QUANTILES)
    columns = {
        "task",
        "shots",
        "mode",
        "score_fn",
        "quantile",
        "tau",
        "frac_zeroed",
        "accuracy",
        "n_items",
        "base_accuracy",
    }
    assert all(set(row) == columns for row in sweep.rows)
    for fn, direction in (("ahon_ln", "<"), ("awft", ">")):
        rows = [r for r in sweep.rows if r["score_fn"] == fn]
        assert [r["quantile"] for r in rows] == list(DEFAULT_QUANTILES)
        taus = [r["tau"] for r in rows]
        assert taus == sorted(taus, reverse=(direction == ">"))  # quantile 1-q for ">" functions
        pooled = base.scores_of(fn).ravel()
        assert taus[3] == pytest.approx(np.quantile(pooled, 0.15 if direction == "<" else 0.85))
        assert rows[0]["frac_zeroed"] == 0.0 and rows[0]["accuracy"] == base.accuracy / 100  # q = 0 zeroes nothing
        assert rows[-1]["frac_zeroed"] > 0
        points = [(100 * r["frac_zeroed"], 100 * r["accuracy"]) for r in rows]
        summary = sweep.summaries[fn]
        assert summary.points == tuple(points)
        assert summary.within_1pt == pct_zeroed_within_1pt(points, base.accuracy)
        assert summary.auc == normalised_auc(points)


# --- bad input ----------------------------------------------------------------------------------------


def test_bad_input_is_refused_with_a_named_error(model_and_tokenizer, requests):
    model, tok = model_and_tokenizer
    with pytest.raises(EvaluationError, match='did you mean "winogrande"'):
        run_sweep(model, tok, ["ahon_ln"], task="winogrand", limit=2, progress=False)
    with pytest.raises(ConfigError, match="unknown score function"):
        run_sweep(model, tok, ["ahon_lm"], limit=2, progress=False)
    with pytest.raises(EvaluationError, match="limit"):
        run_sweep(model, tok, ["ahon_ln"], limit=0, progress=False)
    with pytest.raises(EvaluationError, match="tokenizer"):
        run_sweep(model, None, ["ahon_ln"], limit=2, progress=False)
    with pytest.raises(EvaluationError, match="quantiles"):
        run_sweep(model, tok, ["ahon_ln"], quantiles=(0.1, 1.5), limit=2, progress=False)
    with pytest.raises(EvaluationError, match="shot"):
        winogrande_requests(load_winogrande_items()[:3], shots=3)
    with pytest.raises(DormantError):
        evaluate_static(model, tok, {(5, 0)}, limit=2)  # layer 5 of a 2-layer model


@pytest.mark.parametrize(
    "fn,tau",
    [("ahon", -0.1), ("lthon_ln", -1.0), ("awft", 1.2), ("awft", -0.01), ("random", 2.0), ("ahon_ln", float("nan"))],
)
def test_tau_outside_the_function_range(model_and_tokenizer, requests, fn, tau):
    model, tok = model_and_tokenizer
    with pytest.raises(EvaluationError, match="outside the range"):
        evaluate_winogrande(model, tok, requests[:1], zeroing=DynamicZeroing(fn, tau))


def test_tau_inside_the_range_is_accepted():
    assert check_tau("awft", 1.0) == 1.0 and check_tau("ahon", 12.5) == 12.5 and check_tau("awft_ln", 3.0) == 3.0
