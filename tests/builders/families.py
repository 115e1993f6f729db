"""Tiny random models of every family the score engine knows, for the engine-vs-oracle tests (one builder)."""

from __future__ import annotations

import torch
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3Config,
    Gemma3ForCausalLM,
    Gemma3ForConditionalGeneration,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Olmo2ForCausalLM,
    Olmo3Config,
    Olmo3ForCausalLM,
    OlmoConfig,
    OlmoeConfig,
    OlmoeForCausalLM,
    OlmoForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    SiglipVisionConfig,
    SmolLM3Config,
    SmolLM3ForCausalLM,
)

from dormant_tasks.tiny import tiny_config

WINDOW = 64  # sliding window of the tiny Mistral / Gemma-2: longer than the inputs the oracle tests use
SHORT_WINDOW = 6  # sliding window of the newer families' tiny models: shorter than the inputs their tests use
# The families of issue 40, each with what its tiny model exercises (tests/library/engine/test_new_families.py).
NEW_FAMILIES = {
    "olmo3": "whole-width q/k RMS norms; sliding layers (even) and full layers (odd)",
    "olmoe": "mixture-of-experts MLP (4 experts, top 2); whole-width q/k RMS norms; q/k/v clipping",
    "qwen3": "per-head q/k RMS norms; GQA; layer 0 full, later layers sliding (use_sliding_window)",
    "gemma3_text": "query_pre_attn_scalar scaling (not d_head); per-head q/k norms; sliding and full layers",
    "gemma3": "the multimodal Gemma3ForConditionalGeneration, text inputs only: its text model is gemma3_text",
    "smollm3": "layers without RoPE (odd) that are also its sliding layers (use_sliding_window)",
}


def make_model(kind: str, tokenizer, n_layers: int = 2, seed: int = 0, device="cpu", dtype=torch.float32, **overrides):
    """A random tiny model of `kind` (olmo2, llama, qwen2, gpt_neox, olmo, gpt2, mistral, gemma2, or one of
    NEW_FAMILIES), in eval mode. `window` overrides the sliding window of the windowed kinds."""
    return _make_model(kind, tokenizer, n_layers, seed, **overrides).to(device=device, dtype=dtype)


def _alternating(n_layers: int, first: str, second: str) -> list[str]:
    return [first if i % 2 == 0 else second for i in range(n_layers)]


def _make_model(kind: str, tokenizer, n_layers: int, seed: int, **overrides):
    torch.manual_seed(seed)
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        max_position_embeddings=1024,
        initializer_range=0.15,
        pad_token_id=tokenizer.pad_token_id,
    )
    if kind == "olmo2":
        config = tiny_config(tokenizer, n_layers=n_layers, n_heads=4, hidden_size=64, max_positions=1024)
        config.initializer_range = 0.15
        return Olmo2ForCausalLM(config).eval()
    if kind == "llama":
        return LlamaForCausalLM(LlamaConfig(num_key_value_heads=2, **common)).eval()
    if kind == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(num_key_value_heads=1, **common)).eval()
    if kind == "gpt_neox":  # Pythia's defaults: rotary on 25% of d_head, parallel residual
        config = GPTNeoXConfig(use_parallel_residual=True, attention_bias=True, **common)
        assert config.rope_parameters["partial_rotary_factor"] == 0.25
        return GPTNeoXForCausalLM(config).eval()
    if kind == "olmo":
        return OlmoForCausalLM(OlmoConfig(num_key_value_heads=4, clip_qkv=0.5, **common)).eval()
    if kind == "gpt2":
        config = GPT2Config(
            vocab_size=len(tokenizer),
            n_embd=64,
            n_layer=n_layers,
            n_head=4,
            n_positions=1024,
            initializer_range=0.15,
            scale_attn_by_inverse_layer_idx=True,
            pad_token_id=tokenizer.pad_token_id,
            **overrides,
        )
        return GPT2LMHeadModel(config).eval()
    window = overrides.pop("window", None)
    if kind == "mistral":
        config = MistralConfig(num_key_value_heads=2, sliding_window=window or WINDOW, **common)
        return MistralForCausalLM(config).eval()
    if kind == "gemma2":
        config = Gemma2Config(
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=window or WINDOW,
            attn_logit_softcapping=overrides.get("attn_logit_softcapping"),
            **common,
        )
        assert "sliding_attention" in config.layer_types
        return Gemma2ForCausalLM(config).eval()
    return _make_new_family(kind, n_layers, window or SHORT_WINDOW, common, overrides)


def _make_new_family(kind: str, n_layers: int, window: int, common: dict, overrides: dict):
    sliding = _alternating(n_layers, "sliding_attention", "full_attention")
    if kind == "olmo3":
        return Olmo3ForCausalLM(Olmo3Config(sliding_window=window, layer_types=sliding, **common)).eval()
    if kind == "olmoe":
        config = OlmoeConfig(num_experts=4, num_experts_per_tok=overrides.get("top_k", 2), clip_qkv=0.5, **common)
        return OlmoeForCausalLM(config).eval()
    if kind == "qwen3":
        config = Qwen3Config(
            num_key_value_heads=2,
            head_dim=16,
            use_sliding_window=True,
            sliding_window=window,
            max_window_layers=1,
            **common,
        )
        assert config.layer_types[:2] == ["full_attention", "sliding_attention"]
        return Qwen3ForCausalLM(config).eval()
    text = Gemma3TextConfig(
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=24,
        sliding_window=window,
        layer_types=sliding,
        **common,
    )
    if kind == "gemma3_text":
        return Gemma3ForCausalLM(text).eval()
    if kind == "gemma3":
        vision = SiglipVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=28,
            patch_size=14,
        )
        config = Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4)
        return Gemma3ForConditionalGeneration(config).eval()
    if kind == "smollm3":
        config = SmolLM3Config(
            num_key_value_heads=2,
            no_rope_layers=[1 - i % 2 for i in range(n_layers)],  # 1: RoPE; every odd layer has none
            use_sliding_window=True,
            sliding_window=window,
            **common,
        )
        assert config.layer_types[:2] == ["full_attention", "sliding_attention"]  # the no-RoPE layers slide
        return SmolLM3ForCausalLM(config).eval()
    raise ValueError(kind)
