"""The score engine against the brute-force oracle (tests/builders/oracle.py) on tiny random real models.

Models are randomly initialised OLMo-2 (MHA), Llama (GQA, 2 KV heads) and Qwen2 (GQA, 1 KV head) configs,
with a larger init scale than the default so that attention is far from uniform.

The tests that take the `torch_device` fixture (tests/conftest.py) run on $DORMANT_TEST_DEVICE (default cpu):
with `DORMANT_TEST_DEVICE=cuda` the same engine-vs-oracle comparisons check the GPU paths: the Triton kernel
where Triton is installed (the default) and the float32 query-block rows (`query_block`); benchmarks/gpu_check.sh
does this.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import (
    BloomConfig,
    BloomForCausalLM,
)

from dormant_tasks.engine.score_functions import DETERMINISTIC_IDS
from dormant_tasks.engine.scoring import DynamicZeroing, ScoringOptions, StaticZeroing, score_texts, scoring_pass
from dormant_tasks.errors import ConfigError, ScoringError
from dormant_tasks.tracking.calibration import DEMO_CORPUS
from tests.builders.families import make_model
from tests.builders.oracle import DTYPES, assert_scores_close, oracle_dynamic, oracle_run


@pytest.fixture(scope="module")
def texts():
    return [line for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()][:40]


@pytest.fixture(scope="module")
def olmo2(tiny_tokenizer):
    return make_model("olmo2", tiny_tokenizer)


def ids_of(tokenizer, text, device="cpu") -> torch.Tensor:
    return torch.tensor([tokenizer(text)["input_ids"]], device=device)  # [1, seq]


def engine_scores(model, ids, **kwargs) -> dict[str, np.ndarray]:
    result = scoring_pass(model, ids, torch.ones_like(ids), DETERMINISTIC_IDS, **kwargs)
    return {fn: result.scores[0, i] for i, fn in enumerate(result.score_fns)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["olmo2", "llama", "qwen2"])
@pytest.mark.parametrize("query_block", [None, 4])
def test_every_function_matches_the_oracle(kind, query_block, dtype, torch_device, tiny_tokenizer, texts):
    torch_dtype, rtol = DTYPES[dtype]
    model = make_model(kind, tiny_tokenizer, device=torch_device, dtype=torch_dtype)
    ids = ids_of(tiny_tokenizer, texts[3], torch_device)
    want = oracle_run(model, ids[0]).scores
    assert_scores_close(engine_scores(model, ids, query_block=query_block), want, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("query_block", [None, 128])
def test_long_input_matches_the_oracle(query_block, dtype, torch_device, tiny_tokenizer, texts):
    torch_dtype, rtol = DTYPES[dtype]
    model = make_model("olmo2", tiny_tokenizer, device=torch_device, dtype=torch_dtype)
    ids = ids_of(tiny_tokenizer, " ".join(texts), torch_device)[:, :600]
    assert ids.shape[1] == 600
    want = oracle_run(model, ids[0]).scores
    assert_scores_close(engine_scores(model, ids, query_block=query_block), want, rtol=rtol)


def test_batched_with_padding_equals_one_at_a_time(torch_device, tiny_tokenizer, texts):
    model = make_model("llama", tiny_tokenizer, device=torch_device)
    batch = texts[:7]
    assert len({len(tiny_tokenizer(t)["input_ids"]) for t in batch}) > 1, "inputs must differ in length"
    together = score_texts(model, tiny_tokenizer, batch, ScoringOptions(batch_size=4))
    alone = score_texts(model, tiny_tokenizer, batch, ScoringOptions(batch_size=1))
    np.testing.assert_allclose(together.values, alone.values, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(together.n_tokens, [len(tiny_tokenizer(t)["input_ids"]) for t in batch])
    # and one padded input equals the oracle on that input alone
    want = oracle_run(model, ids_of(tiny_tokenizer, batch[1], torch_device)[0]).scores
    got = {fn: together.get(fn)[1] for fn in DETERMINISTIC_IDS}
    assert_scores_close(got, want)


def test_random_baseline_is_seeded_per_input(olmo2, tiny_tokenizer, texts):
    a = score_texts(olmo2, tiny_tokenizer, texts[:5], ScoringOptions(("random",), batch_size=2, seed=3)).get("random")
    b = score_texts(olmo2, tiny_tokenizer, texts[:5], ScoringOptions(("random",), batch_size=5, seed=3)).get("random")
    c = score_texts(olmo2, tiny_tokenizer, texts[:5], ScoringOptions(("random",), batch_size=5, seed=4)).get("random")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert ((a >= 0) & (a < 1)).all()
    assert len(np.unique(a)) == a.size  # distinct per (input, layer, head)


def test_bf16_model_gives_float32_scores_close_to_the_float32_model(torch_device, tiny_tokenizer, texts):
    model = make_model("olmo2", tiny_tokenizer, device=torch_device)
    f32 = score_texts(model, tiny_tokenizer, texts[:4], ScoringOptions(DETERMINISTIC_IDS, batch_size=2))
    bf16 = score_texts(
        model.to(torch.bfloat16), tiny_tokenizer, texts[:4], ScoringOptions(DETERMINISTIC_IDS, batch_size=2)
    )
    assert bf16.values.dtype == np.float64
    # the only non-finite values are the NaN ftvvn_ln of layer 0 (the zero-embedding boundary token)
    np.testing.assert_array_equal(np.isfinite(bf16.values), np.isfinite(f32.values))
    assert np.isfinite(np.delete(bf16.values, DETERMINISTIC_IDS.index("ftvvn_ln"), axis=1)).all()
    np.testing.assert_allclose(bf16.values, f32.values, rtol=0.05)


def test_single_token_input(olmo2):
    ids = torch.tensor([[7]])
    got = engine_scores(olmo2, ids)
    want = oracle_run(olmo2, ids[0]).scores
    assert (got["aeqd"] == 0).all()
    assert np.isnan(got["aeqd_ln"]).all()
    assert_scores_close(got, want, fns=[fn for fn in DETERMINISTIC_IDS if fn != "aeqd_ln"])


def test_zero_first_token_value_gives_nan_ln_scores(tiny_tokenizer, texts):
    """OLMo-2 is post-norm without biases: a zero first-token embedding keeps that token's hidden state, hence
    its value vector, at zero in every layer (it attends only to itself), so ftvvn = 0 for every head."""
    model = make_model("olmo2", tiny_tokenizer)
    ids = ids_of(tiny_tokenizer, texts[0])
    with torch.no_grad():
        model.model.embed_tokens.weight[ids[0, 0]] = 0
    got = engine_scores(model, ids)
    assert (got["ftvvn"] == 0).all()
    assert np.isnan(got["ftvvn_ln"]).all()
    assert np.isfinite(got["ahon_ln"]).all()
    # NaN is never inactive: a tau that every finite score falls below zeroes nothing on ftvvn_ln
    none = scoring_pass(model, ids, torch.ones_like(ids), ["ftvvn_ln"], DynamicZeroing("ftvvn_ln", 1e9))
    assert not none.zeroed.any()
    every = scoring_pass(model, ids, torch.ones_like(ids), ["ahon_ln"], DynamicZeroing("ahon_ln", 1e9))
    assert every.zeroed.all()


@pytest.mark.parametrize("kind,score_fn", [("olmo2", "ahon_ln"), ("llama", "awft_ln"), ("qwen2", "aeqd")])
def test_dynamic_zeroing_matches_the_layer_by_layer_oracle(kind, score_fn, torch_device, tiny_tokenizer, texts):
    model = make_model(kind, tiny_tokenizer, n_layers=3, device=torch_device)
    ids = ids_of(tiny_tokenizer, texts[5], torch_device)
    plain = oracle_run(model, ids[0]).scores[score_fn]
    tau = float(np.median(plain))  # selects about half of the heads
    want_scores, want_zeroed, want_logits = oracle_dynamic(model, ids[0], score_fn, tau)
    assert 0 < want_zeroed.sum() < want_zeroed.size
    result = scoring_pass(model, ids, torch.ones_like(ids), DETERMINISTIC_IDS, DynamicZeroing(score_fn, tau))
    np.testing.assert_array_equal(result.zeroed[0], want_zeroed)
    assert_scores_close({fn: result.scores[0, i] for i, fn in enumerate(result.score_fns)}, want_scores)
    torch.testing.assert_close(result.logits[0], want_logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["olmo2", "llama"])
def test_first_token_weight_without_entropy_matches_the_oracle(kind, dtype, torch_device, tiny_tokenizer, texts):
    """The sweep's functions (ahon_ln, lthon_ln, awft) ask for no entropy: on CPU in float32 awft then reuses
    the attention output's own log-sum-exp instead of a second attention call; scores and dynamic awft
    zeroing must equal the oracle's as on the full path."""
    torch_dtype, rtol = DTYPES[dtype]
    model = make_model(kind, tiny_tokenizer, n_layers=3, device=torch_device, dtype=torch_dtype)
    ids = ids_of(tiny_tokenizer, texts[5], torch_device)
    fns = ("ahon_ln", "lthon_ln", "awft", "awft_ln")
    got = scoring_pass(model, ids, torch.ones_like(ids), fns)
    assert_scores_close(dict(zip(got.score_fns, got.scores[0])), oracle_run(model, ids[0]).scores, rtol, fns)
    if torch_dtype is torch.float32:
        plain = oracle_run(model, ids[0]).scores["awft"]
        tau = float(np.median(plain))
        want_scores, want_zeroed, want_logits = oracle_dynamic(model, ids[0], "awft", tau)
        assert 0 < want_zeroed.sum() < want_zeroed.size
        result = scoring_pass(model, ids, torch.ones_like(ids), fns, DynamicZeroing("awft", tau))
        np.testing.assert_array_equal(result.zeroed[0], want_zeroed)
        assert_scores_close(dict(zip(result.score_fns, result.scores[0])), want_scores, fns=fns)
        torch.testing.assert_close(result.logits[0], want_logits, rtol=1e-5, atol=1e-5)


def capture_o_proj_inputs(model):
    captured, hooks = {}, []
    for i, layer in enumerate(model.model.layers):
        hooks.append(
            layer.self_attn.o_proj.register_forward_pre_hook(
                lambda module, args, i=i: captured.__setitem__(i, args[0].clone())
            )
        )
    return captured, hooks


def test_static_zeroing_changes_exactly_the_chosen_slices(olmo2, tiny_tokenizer, texts):
    chosen = {(1, 0), (1, 2)}
    ids = torch.tensor([tiny_tokenizer(texts[1])["input_ids"][:12], tiny_tokenizer(texts[2])["input_ids"][:12]])
    mask = torch.ones_like(ids)
    captured, hooks = capture_o_proj_inputs(olmo2)
    try:
        plain = scoring_pass(olmo2, ids, mask, DETERMINISTIC_IDS)
        before = dict(captured)
        zeroed = scoring_pass(olmo2, ids, mask, DETERMINISTIC_IDS, StaticZeroing(frozenset(chosen)))
        after = dict(captured)
    finally:
        for hook in hooks:
            hook.remove()
    assert torch.equal(before[0], after[0])  # nothing before the layer changes
    d = before[1].shape[-1] // 4
    for h in range(4):
        got, was = after[1][..., h * d : (h + 1) * d], before[1][..., h * d : (h + 1) * d]
        if (1, h) in chosen:
            assert (got == 0).all() and (was != 0).any()
        else:
            assert torch.equal(got, was)
    want_mask = np.zeros((2, 2, 4), dtype=bool)
    want_mask[:, 1, [0, 2]] = True
    np.testing.assert_array_equal(zeroed.zeroed, want_mask)
    # scores of a zeroing pass are those of the pre-zeroing output: unchanged up to the zeroed layer
    np.testing.assert_array_equal(zeroed.scores[:, :, :2], plain.scores[:, :, :2])
    assert not torch.equal(zeroed.logits, plain.logits)


def test_dynamic_zeroing_that_selects_nothing_is_bit_for_bit_the_plain_run(olmo2, tiny_tokenizer, texts):
    ids = ids_of(tiny_tokenizer, texts[4])
    mask = torch.ones_like(ids)
    plain = scoring_pass(olmo2, ids, mask)
    none = scoring_pass(olmo2, ids, mask, zeroing=DynamicZeroing("ahon_ln", -1.0))
    assert not none.zeroed.any()
    assert torch.equal(plain.logits, none.logits)
    np.testing.assert_array_equal(plain.scores, none.scores)


def test_logits_equal_the_plain_sdpa_forward(torch_device, tiny_tokenizer, texts):
    model = make_model("olmo2", tiny_tokenizer, device=torch_device)  # the `olmo2` fixture's weights
    ids = ids_of(tiny_tokenizer, texts[6], torch_device)
    with torch.no_grad():
        want = model(input_ids=ids).logits
    got = scoring_pass(model, ids, torch.ones_like(ids)).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert model.config._attn_implementation == "sdpa"  # restored


def test_model_without_attention_interface_is_refused(tiny_tokenizer):
    model = BloomForCausalLM(BloomConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, n_layer=2, n_head=4)).eval()
    with pytest.raises(ScoringError, match="AttentionInterface"):
        scoring_pass(model, torch.tensor([[1, 2, 3]]))


def test_a_model_of_no_layers_is_refused_in_one_line(tiny_tokenizer):
    """Issue 62: a 0-layer model passed the layer count check (0 of 0 layers reported) and died in torch.stack."""
    model = make_model("olmo2", tiny_tokenizer, n_layers=0)
    with pytest.raises(ScoringError, match="has 0 layers of 4 heads: no head to score"):
        scoring_pass(model, torch.tensor([[1, 2, 3]]))


def test_bad_inputs_are_refused(olmo2, tiny_tokenizer):
    ids = torch.tensor([[5, 6, 7], [5, 6, 7]])
    with pytest.raises(ScoringError, match="right-padded"):
        scoring_pass(olmo2, ids, torch.tensor([[1, 1, 1], [0, 1, 1]]))
    with pytest.raises(ScoringError, match="no tokens"):
        scoring_pass(olmo2, ids, torch.tensor([[1, 1, 1], [0, 0, 0]]))
    with pytest.raises(ConfigError, match="outside"):
        scoring_pass(olmo2, ids, zeroing=StaticZeroing(frozenset({(2, 0)})))
    with pytest.raises(ConfigError, match="did you mean"):
        DynamicZeroing("ahon_nl", 0.5)
    with pytest.raises(ScoringError, match="no texts"):
        score_texts(olmo2, tiny_tokenizer, [])
    assert olmo2.config._attn_implementation == "sdpa"


def test_input_scores_table_layout(olmo2, tiny_tokenizer, texts):
    scores = score_texts(olmo2, tiny_tokenizer, texts[:3], ScoringOptions(("ahon_ln", "random"), batch_size=2))
    table = scores.to_table()
    assert table.column_names == ["input_index", "score_fn", "layer", "head_index", "score"]
    assert table.num_rows == 3 * 2 * 2 * 4
    rows = table.to_pylist()
    for row in rows[::7]:
        value = scores.get(row["score_fn"])[row["input_index"], row["layer"], row["head_index"]]
        assert row["score"] == np.float32(value)  # stored as float32
