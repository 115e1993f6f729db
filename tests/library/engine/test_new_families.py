"""The families of issue 40 (OLMo-3, OLMoE, Qwen3, Gemma-3 text and multimodal, SmolLM3) and sliding windows
shorter than the input, on every path of the score engine, against the brute-force oracle (tests/builders/oracle.py).

Tiny random models with each family's real config class (tests/builders/families.py NEW_FAMILIES says what each
exercises); windowed layers have a window of SHORT_WINDOW tokens and the inputs are 12-20 tokens, right-padded
in one batch, so most queries see only part of the input. The oracle takes eager attention (the model's own
masks) one unpadded input at a time. Paths: the default (CPU: the fused kernel, per query block over the window),
the float32 query-block rows (`query_block`), and the Triton kernel (in Triton's interpreter on CPU; skipped
without Triton). With DORMANT_TEST_DEVICE=cuda the tests taking `torch_device` run on the GPU (the default path
is then sdpa with a boolean window mask, or the compiled kernel): benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from dormant_tasks.engine import attention
from dormant_tasks.engine.adapters import adapter_for
from dormant_tasks.engine.score_functions import DETERMINISTIC_IDS
from dormant_tasks.engine.scoring import DynamicZeroing, StaticZeroing, scoring_pass
from dormant_tasks.errors import ScoringError
from dormant_tasks.tracking.calibration import DEMO_CORPUS
from tests.builders.families import NEW_FAMILIES, SHORT_WINDOW, make_model
from tests.builders.oracle import assert_scores_close, oracle_dynamic, oracle_run

LENGTHS = (20, 12, 16)  # one right-padded batch: every input longer than SHORT_WINDOW, all of different lengths
HAS_TRITON = importlib.util.find_spec("triton") is not None
PATHS = {
    "default": {},
    "query_block": {"query_block": 4},
    "triton": {"kernel": "triton"},
}


def _path(name):
    skip = name == "triton" and not HAS_TRITON
    return pytest.param(name, marks=pytest.mark.skipif(skip, reason="Triton is not installed"))


@pytest.fixture(scope="module")
def rows(tiny_tokenizer):
    texts = [line for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [tiny_tokenizer(t)["input_ids"][:n] for t, n in zip(texts[3:6], LENGTHS)]
    assert [len(r) for r in rows] == list(LENGTHS)
    return rows


def padded(rows, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) [batch, longest]: right-padded with token 0."""
    ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = torch.tensor(r), 1
    return ids.to(device), mask.to(device)


@pytest.fixture(scope="module")
def family_oracles(tiny_tokenizer, rows, torch_device):
    """kind -> (model, [OracleRun per row]): built once per family for the module."""
    cache = {}

    def get(kind):
        if kind not in cache:
            model = make_model(kind, tiny_tokenizer, device=torch_device)
            cache[kind] = model, [oracle_run(model, torch.tensor(r, device=torch_device)) for r in rows]
        return cache[kind]

    return get


def test_the_tiny_models_have_what_they_exercise(tiny_tokenizer):
    """The builders' claims, read from the built modules: windows shorter than the inputs, QK norms, no-RoPE
    layers, Gemma's scaling, experts (so a test below that passes is not passing on a plain Llama)."""
    windows = {}
    for kind in NEW_FAMILIES:
        model = make_model(kind, tiny_tokenizer)
        text = model.config.get_text_config()
        layers = getattr(model.model, "language_model", model.model).layers
        windows[kind] = [getattr(layer.self_attn, "sliding_window", None) for layer in layers]
        if kind != "olmoe" and kind != "smollm3":
            assert hasattr(layers[0].self_attn, "q_norm") and hasattr(layers[0].self_attn, "k_norm"), kind
        if kind.startswith("gemma3"):
            assert layers[0].self_attn.scaling == 24**-0.5 != text.head_dim**-0.5
        if kind == "smollm3":
            assert [layer.self_attn.use_rope for layer in layers] == [1, 0]
        if kind == "olmoe":
            assert hasattr(layers[0].self_attn, "q_norm") and layers[0].mlp.gate.top_k == 2 and text.clip_qkv == 0.5
    assert windows == {
        "olmo3": [SHORT_WINDOW, None],
        "olmoe": [None, None],
        "qwen3": [None, SHORT_WINDOW],
        "gemma3_text": [SHORT_WINDOW, None],
        "gemma3": [SHORT_WINDOW, None],
        "smollm3": [None, SHORT_WINDOW],
    }
    assert min(LENGTHS) > SHORT_WINDOW


@pytest.mark.parametrize("path", [_path(p) for p in PATHS])
@pytest.mark.parametrize("kind", list(NEW_FAMILIES))
def test_every_function_and_the_logits_match_the_oracle_in_a_padded_batch(
    kind, path, family_oracles, rows, torch_device
):
    model, want = family_oracles(kind)
    ids, mask = padded(rows, torch_device)
    result = scoring_pass(model, ids, mask, DETERMINISTIC_IDS, **PATHS[path])
    for i, r in enumerate(rows):
        assert_scores_close(dict(zip(result.score_fns, result.scores[i])), want[i].scores, rtol=1e-4)
        # the windowed layers' output is the model's: logits at real positions equal eager on the input alone
        torch.testing.assert_close(result.logits[i, : len(r)], want[i].logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", [_path(p) for p in PATHS])
@pytest.mark.parametrize("kind", ["mistral", "gemma2"])
def test_older_windowed_families_longer_than_the_window_match_the_oracle(
    kind, path, tiny_tokenizer, rows, torch_device
):
    """Mistral (a window on every layer) and Gemma-2 (alternate layers), formerly refused past the window."""
    model = make_model(kind, tiny_tokenizer, device=torch_device, window=SHORT_WINDOW)
    ids, mask = padded(rows, torch_device)
    result = scoring_pass(model, ids, mask, DETERMINISTIC_IDS, **PATHS[path])
    for i, r in enumerate(rows):
        want = oracle_run(model, torch.tensor(r, device=torch_device))
        assert_scores_close(dict(zip(result.score_fns, result.scores[i])), want.scores, rtol=1e-4)
        torch.testing.assert_close(result.logits[i, : len(r)], want.logits, rtol=1e-4, atol=1e-4)


def test_first_token_weight_is_zero_past_the_window_and_averaged_over_every_query(tiny_tokenizer, rows):
    """awft on a sliding layer is the mean of A_i0 over ALL real queries, those past the window adding exactly 0:
    a head's awft there is at most window / length, whatever its attention does."""
    model = make_model("olmo3", tiny_tokenizer)
    ids, mask = padded(rows, "cpu")
    for path in ("default", "query_block"):
        awft = scoring_pass(model, ids, mask, ["awft"], **PATHS[path]).scores[:, 0, 0]  # [batch, head] of layer 0
        bound = SHORT_WINDOW / torch.tensor(LENGTHS, dtype=torch.float64)[:, None]
        assert (torch.from_numpy(awft) <= bound + 1e-12).all(), path


@pytest.mark.parametrize("device_path", ["cpu_fused", "blocks_sdpa"])
def test_windowed_torch_attention_matches_brute_force(device_path, torch_device, monkeypatch):
    """The windowed output and log-sum-exp, query block by query block (blocks smaller and larger than the
    window, a ragged tail), against float64 softmax over the window rule i - window < j <= i."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 29, 8, generator=gen) * 2 for _ in range(3))
    i, j = torch.arange(29)[:, None], torch.arange(29)
    for window, block in ((1, 4), (5, 4), (5, 16), (7, 29)):
        z = (0.3 * q.double() @ k.double().transpose(-1, -2)).masked_fill(~((j <= i) & (i - j < window)), -torch.inf)
        want_out, want_lse = z.softmax(-1) @ v.double(), z.logsumexp(-1)
        dev = torch_device if device_path == "blocks_sdpa" else torch.device("cpu")
        if device_path == "blocks_sdpa":
            monkeypatch.setattr(attention, "_FUSED_CPU", None)  # on CPU too: sdpa with the boolean mask
        out, lse = attention._windowed_attention(q.to(dev), k.to(dev), v.to(dev), 0.3, window, block)
        torch.testing.assert_close(out.cpu().double(), want_out, rtol=1e-5, atol=1e-5)
        if lse is not None:
            torch.testing.assert_close(lse.cpu().double(), want_lse, rtol=1e-5, atol=1e-5)
        assert (lse is not None) == (device_path == "cpu_fused")


@pytest.mark.parametrize(
    "kind,score_fn,path",
    [
        ("olmo3", "ahon_ln", "default"),
        ("gemma3_text", "aeqd", "query_block"),
        ("olmoe", "awft", "default"),
        pytest.param("smollm3", "fhon_ln", "triton", marks=pytest.mark.skipif(not HAS_TRITON, reason="no Triton")),
    ],
)
def test_dynamic_zeroing_matches_the_layer_by_layer_oracle(kind, score_fn, path, tiny_tokenizer, rows, torch_device):
    """The engine zeroes inside attention; the oracle zeroes the o_proj input with a forward pre-hook, one layer's
    decision at a time: the same heads, scores and logits on windowed families and on OLMoE."""
    model = make_model(kind, tiny_tokenizer, n_layers=3, device=torch_device)
    ids = torch.tensor([rows[0]], device=torch_device)
    tau = float(np.median(oracle_run(model, ids[0]).scores[score_fn]))  # selects about half of the heads
    want_scores, want_zeroed, want_logits = oracle_dynamic(model, ids[0], score_fn, tau)
    assert 0 < want_zeroed.sum() < want_zeroed.size
    result = scoring_pass(
        model, ids, torch.ones_like(ids), DETERMINISTIC_IDS, DynamicZeroing(score_fn, tau), **PATHS[path]
    )
    np.testing.assert_array_equal(result.zeroed[0], want_zeroed)
    assert_scores_close(dict(zip(result.score_fns, result.scores[0])), want_scores, rtol=1e-4)
    torch.testing.assert_close(result.logits[0], want_logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["gemma3_text", "olmoe"])
def test_static_zeroing_zeroes_the_output_projection_input_in_a_padded_batch(kind, tiny_tokenizer, rows):
    """What o_proj receives during a scoring pass with static zeroing: exactly 0 on the zeroed heads' slices, and
    everywhere (real positions) what the hook oracle's o_proj receives with those slices zeroed by hand."""
    model = make_model(kind, tiny_tokenizer)
    heads = {0: {1, 3}, 1: {0}}
    layers = getattr(model.model, "language_model", model.model).layers
    seen = {}
    hooks = [
        layer.self_attn.o_proj.register_forward_pre_hook(lambda m, args, i=i: seen.__setitem__(i, args[0].clone()))
        for i, layer in enumerate(layers)
    ]
    ids, mask = padded(rows, "cpu")
    try:
        scoring_pass(
            model, ids, mask, ["ahon"], StaticZeroing(frozenset((la, h) for la, hs in heads.items() for h in hs))
        )
    finally:
        for hook in hooks:
            hook.remove()
    d = layers[0].self_attn.head_dim
    for i, r in enumerate(rows):
        want = oracle_run(model, torch.tensor(r), zero=heads).o_proj_inputs
        for layer, zeroed in heads.items():
            got = seen[layer][i, : len(r)]  # [seq, head * d]
            for h in zeroed:
                assert (got[:, h * d : (h + 1) * d] == 0).all()
            torch.testing.assert_close(got.double(), want[layer].double(), rtol=1e-4, atol=1e-5)


def test_olmoe_layer0_scores_do_not_depend_on_the_router(tiny_tokenizer, rows):
    """Experts are MLPs after attention: the same weights routed to 1 or 2 experts per token give different
    logits and later-layer scores, and bit-identical layer-0 scores (attention sees only the embeddings there)."""
    ids, mask = padded(rows, "cpu")
    top2 = scoring_pass(make_model("olmoe", tiny_tokenizer, top_k=2), ids, mask, DETERMINISTIC_IDS)
    top1_model = make_model("olmoe", tiny_tokenizer, top_k=1)
    assert top1_model.model.layers[0].mlp.gate.top_k == 1
    top1 = scoring_pass(top1_model, ids, mask, DETERMINISTIC_IDS)
    assert not torch.allclose(top1.logits, top2.logits, rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(top1.scores[:, :, 0], top2.scores[:, :, 0])
    assert not np.allclose(top1.scores[:, :, 1], top2.scores[:, :, 1], rtol=1e-3, equal_nan=True)


def test_a_full_layer_keeps_the_full_path(monkeypatch, tiny_tokenizer, rows):
    """Only a layer that passes a window shorter than the input runs the windowed path: a full layer, and a
    sliding layer whose window covers the input, keep the fused kernel over the whole input."""
    calls = []
    real = attention._windowed_attention
    monkeypatch.setattr(attention, "_windowed_attention", lambda *a, **kw: calls.append(a[4]) or real(*a, **kw))
    ids, mask = padded(rows, "cpu")
    scoring_pass(make_model("olmo3", tiny_tokenizer), ids, mask, ["ahon", "aeqd"])
    assert calls == [SHORT_WINDOW, SHORT_WINDOW]  # layer 0 (sliding): the output, then the keys' mean; layer 1 none
    calls.clear()
    scoring_pass(make_model("olmo3", tiny_tokenizer, window=max(LENGTHS)), ids, mask, ["ahon", "aeqd"])
    assert calls == []


def one_line_refusal(excinfo, *words):
    message = str(excinfo.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_refused_features_of_the_new_families_are_one_line(tiny_tokenizer):
    olmoe = make_model("olmoe", tiny_tokenizer)
    olmoe.config.sliding_window = 4  # its layers would pass it, its mask ignores it
    with pytest.raises(ScoringError) as excinfo:
        scoring_pass(olmoe, torch.tensor([[1, 2, 3]]))
    one_line_refusal(excinfo, "OlmoeForCausalLM", "sliding_window=4", "OLMoE")
    gemma = make_model("gemma3", tiny_tokenizer)
    gemma.config.text_config.attn_logit_softcapping = 30.0
    with pytest.raises(ScoringError) as excinfo:
        adapter_for(gemma)
    one_line_refusal(excinfo, "Gemma3ForConditionalGeneration", "soft-capping", "attn_logit_softcapping=30.0")
    gemma.config.text_config.attn_logit_softcapping = None
    gemma.config.text_config.use_bidirectional_attention = True
    with pytest.raises(ScoringError) as excinfo:
        adapter_for(gemma)
    one_line_refusal(excinfo, "bidirectional attention")
