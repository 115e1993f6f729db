"""Tiny random models of every family the score engine knows, for the engine-vs-oracle tests (one builder)."""

from __future__ import annotations

import torch
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Olmo2ForCausalLM,
    OlmoConfig,
    OlmoForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from dormant_tasks.tiny import tiny_config

WINDOW = 64  # sliding window of the tiny Mistral / Gemma-2: longer than the inputs the oracle tests use


def make_model(kind: str, tokenizer, n_layers: int = 2, seed: int = 0, device="cpu", dtype=torch.float32, **overrides):
    """A random tiny model of `kind` (olmo2, llama, qwen2, gpt_neox, olmo, gpt2, mistral, gemma2), in eval mode."""
    return _make_model(kind, tokenizer, n_layers, seed, **overrides).to(device=device, dtype=dtype)


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
    if kind == "mistral":
        return MistralForCausalLM(MistralConfig(num_key_value_heads=2, sliding_window=WINDOW, **common)).eval()
    if kind == "gemma2":
        config = Gemma2Config(
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=WINDOW,
            attn_logit_softcapping=overrides.get("attn_logit_softcapping"),
            **common,
        )
        assert "sliding_attention" in config.layer_types
        return Gemma2ForCausalLM(config).eval()
    raise ValueError(kind)
