"""The score engine on every family it has an adapter for (dormant_tasks/engine/adapters.py), against the oracle.

Tiny random models, a larger init scale than the default so attention is far from uniform:
- GPT-NeoX (Pythia): fused query_key_value, partial rotary (a quarter of d_head), parallel residual, `dense`;
- OLMo-1: separate projections with q/k/v clipping set low enough to clip (the engine must see clipped values);
- GPT-2: Conv1D c_attn / c_proj ([in, out] weights), absolute positions, attention scaled by 1 / layer;
- Mistral and Gemma-2 with a sliding window longer than the input, and Gemma-2 without soft-capping (windows
  shorter than the input, and the newer families: test_new_families.py).
Refusals (one line each): soft-capping, an unknown family, cross-attention.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import (
    Phi3Config,
    Phi3ForCausalLM,
)

from dormant_tasks.engine.adapters import FAMILIES, adapter_for
from dormant_tasks.engine.score_functions import DETERMINISTIC_IDS
from dormant_tasks.engine.scoring import DynamicZeroing, ScoringOptions, score_texts, scoring_pass
from dormant_tasks.errors import ScoringError
from dormant_tasks.tracking.calibration import DEMO_CORPUS
from tests.builders.families import NEW_FAMILIES, WINDOW, make_model
from tests.builders.oracle import assert_scores_close, oracle_dynamic, oracle_run

FAMILY_KINDS = ["gpt_neox", "olmo", "gpt2", "mistral", "gemma2"]


@pytest.fixture(scope="module")
def texts():
    return [line for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()][:40]


def ids_of(tokenizer, text, device="cpu", limit=WINDOW) -> torch.Tensor:
    return torch.tensor([tokenizer(text)["input_ids"][:limit]], device=device)  # [1, seq]


@pytest.mark.parametrize("kind", FAMILY_KINDS)
@pytest.mark.parametrize("query_block", [None, 4])
def test_every_function_matches_the_oracle(kind, query_block, torch_device, tiny_tokenizer, texts):
    model = make_model(kind, tiny_tokenizer).to(torch_device)
    ids = ids_of(tiny_tokenizer, texts[3], torch_device)
    want = oracle_run(model, ids[0]).scores
    result = scoring_pass(model, ids, torch.ones_like(ids), DETERMINISTIC_IDS, query_block=query_block)
    assert_scores_close(dict(zip(result.score_fns, result.scores[0])), want)


@pytest.mark.parametrize("kind", FAMILY_KINDS)
def test_padded_batch_matches_the_oracle_input_by_input(kind, torch_device, tiny_tokenizer, texts):
    model = make_model(kind, tiny_tokenizer).to(torch_device)
    batch = [text[: 30 + 20 * i] for i, text in enumerate(texts[:5])]  # differently long, within the window
    lengths = [len(tiny_tokenizer(t)["input_ids"]) for t in batch]
    assert len(set(lengths)) > 1 and max(lengths) <= WINDOW, "inputs must differ in length and fit the window"
    together = score_texts(model, tiny_tokenizer, batch, ScoringOptions(DETERMINISTIC_IDS, batch_size=5))
    for i, text in enumerate(batch):
        want = oracle_run(model, ids_of(tiny_tokenizer, text, torch_device)[0]).scores
        assert_scores_close({fn: together.get(fn)[i] for fn in DETERMINISTIC_IDS}, want)


@pytest.mark.parametrize("kind,score_fn", [("gpt_neox", "ahon_ln"), ("gpt2", "fhon_ln"), ("olmo", "avvn_ln")])
def test_dynamic_zeroing_at_the_family_output_projection(kind, score_fn, tiny_tokenizer, texts):
    """The engine zeroes inside attention; the oracle zeroes the input of `dense` / `c_proj` / `o_proj`: the same
    heads, scores and logits show the adapter's output projection is the one the heads' slices feed."""
    model = make_model(kind, tiny_tokenizer, n_layers=3)
    ids = ids_of(tiny_tokenizer, texts[5])
    tau = float(np.median(oracle_run(model, ids[0]).scores[score_fn]))
    want_scores, want_zeroed, want_logits = oracle_dynamic(model, ids[0], score_fn, tau)
    assert 0 < want_zeroed.sum() < want_zeroed.size
    result = scoring_pass(model, ids, torch.ones_like(ids), DETERMINISTIC_IDS, DynamicZeroing(score_fn, tau))
    np.testing.assert_array_equal(result.zeroed[0], want_zeroed)
    assert_scores_close(dict(zip(result.score_fns, result.scores[0])), want_scores)
    torch.testing.assert_close(result.logits[0], want_logits, rtol=1e-5, atol=1e-5)


def test_olmo_clipping_changes_the_values_the_engine_scores(tiny_tokenizer, texts):
    """clip_qkv = 0.5 bites on these weights: unclipped value norms would differ, so avvn checks the clip."""
    model = make_model("olmo", tiny_tokenizer)
    ids = ids_of(tiny_tokenizer, texts[3])
    raw = {}
    hook = model.model.layers[0].self_attn.v_proj.register_forward_hook(lambda m, a, out: raw.update(v=out.clone()))
    try:
        scoring_pass(model, ids, torch.ones_like(ids), ["avvn"])
    finally:
        hook.remove()
    assert (raw["v"].abs() > 0.5).any()


def test_logits_equal_the_plain_forward(tiny_tokenizer, texts):
    for kind in FAMILY_KINDS:
        model = make_model(kind, tiny_tokenizer)
        ids = ids_of(tiny_tokenizer, texts[6])
        with torch.no_grad():
            want = model(input_ids=ids).logits
        torch.testing.assert_close(scoring_pass(model, ids).logits, want, rtol=1e-5, atol=1e-5, msg=kind)


def test_every_registered_family_has_a_tested_builder():
    newer = set(NEW_FAMILIES) - {"gemma3"}  # test_new_families.py; the multimodal Gemma-3's text model is gemma3_text
    assert set(FAMILIES) == set(FAMILY_KINDS) | {"olmo2", "llama", "qwen2"} | newer  # olmo2 ...: test_scoring.py


def one_line_refusal(excinfo, *words):
    message = str(excinfo.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_soft_capping_is_refused_in_one_line(tiny_tokenizer):
    model = make_model("gemma2", tiny_tokenizer, attn_logit_softcapping=50.0)
    with pytest.raises(ScoringError) as excinfo:
        scoring_pass(model, torch.tensor([[1, 2, 3]]))
    one_line_refusal(excinfo, "Gemma2ForCausalLM", "soft-capping", "attn_logit_softcapping=50.0")
    assert model.config._attn_implementation != "dormant_scoring"


@pytest.mark.parametrize("kind", ["mistral", "gemma2"])
def test_padding_past_the_window_changes_no_score(kind, tiny_tokenizer, texts):
    """The window the engine applies is the layer's, compared with the batch's padded length: a batch padded past
    the window runs the windowed path (exact: test_new_families.py), and its short input's scores are unchanged."""
    model = make_model(kind, tiny_tokenizer)
    ids = ids_of(tiny_tokenizer, " ".join(texts), limit=WINDOW + 1)
    assert ids.shape[1] == WINDOW + 1
    mask = torch.zeros_like(ids)
    mask[0, :10] = 1
    alone = scoring_pass(model, ids[:, :10], None, DETERMINISTIC_IDS).scores
    np.testing.assert_allclose(scoring_pass(model, ids, mask, DETERMINISTIC_IDS).scores, alone, rtol=1e-5)


def test_unknown_family_is_refused_in_one_line(tiny_tokenizer):
    config = Phi3Config(
        vocab_size=len(tiny_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        pad_token_id=tiny_tokenizer.pad_token_id,
    )
    model = Phi3ForCausalLM(config).eval()
    with pytest.raises(ScoringError) as excinfo:
        scoring_pass(model, torch.tensor([[1, 2, 3]]))
    one_line_refusal(excinfo, "Phi3ForCausalLM", "'phi3'", "GPT-NeoX (Pythia)", "GPT-2")
    with pytest.raises(ScoringError):
        adapter_for(model)


def test_gpt2_cross_attention_is_refused(tiny_tokenizer):
    model = make_model("gpt2", tiny_tokenizer, add_cross_attention=True)
    with pytest.raises(ScoringError) as excinfo:
        adapter_for(model)
    one_line_refusal(excinfo, "cross-attention")
