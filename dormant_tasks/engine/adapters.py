"""One small adapter per model family: where a layer's output projection and value vectors are, and which of
the family's attention features the score engine refuses.

The scoring attention function (`engine.attention`) receives each layer's queries, keys and values from the
model itself, after every family-specific step (fused or separate q/k/v projections, full or partial rotary,
OLMo-1's q/k/v clipping, GPT-2's absolute positions), so the value vectors v[h, j] need no family code: they
are the `value` argument, [batch, kv_head, seq, d_head]. What differs per family is the module that holds the
output projection W_O (fhon's Gram matrices) and how its weight is stored; the adapter names both, and the
value source for the docs and the oracle tests. A family not in `FAMILIES` is refused in one line: a model the
engine was never checked against must not be scored as if it were one it knows.

Attention features: causal softmax attention with any scaling (Gemma's query_pre_attn_scalar arrives as the
layer's `scaling`), grouped KV heads and sliding windows is what the engine computes. Steps inside the layer
before attention need nothing here either, since the engine receives their result: per-head or whole-width
q/k RMS norms (OLMo-2/3, OLMoE, Qwen3, Gemma-3), layers without rotary positions (SmolLM3's `no_rope_layers`).
A sliding window is the one the layer passes (`sliding_window`, per layer: OLMo-3, Gemma-2/3, SmolLM3 and Qwen3
set it on their "sliding_attention" layers of `config.layer_types`, Mistral on every layer), applied exactly by
`engine.attention`. Logit soft-capping and attention sinks are refused, here from the config and there again
from the arguments the layer passes.

Mixture of experts (OLMoE): the experts and their router are the MLP of each layer, after attention; the engine
scores attention heads only, and a head's scores depend on the router only through the residual stream that
earlier layers' experts wrote (layer 0's scores not at all), exactly as they depend on a dense MLP.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dormant_tasks.errors import ScoringError


@dataclass(frozen=True)
class FamilyAdapter:
    """Where one family keeps the pieces the scores need."""

    family: str  # the name users know, for messages and docs
    output_projection: str  # attribute of the attention module that maps head outputs to the residual stream
    values: str  # where the value vectors come from (documentation; the engine receives them from the layer)
    conv1d: bool = False  # GPT-2's Conv1D stores its weight as [in, out], the transpose of nn.Linear

    def output_weight(self, attention_module) -> torch.Tensor:
        """W_O as float32 [width, head * d_head], whatever the storage: head h's slice is columns h*d .. (h+1)*d."""
        weight = getattr(attention_module, self.output_projection).weight  # [width, head*d] or [head*d, width]
        # bitsandbytes stores a quantised Conv1D as a Linear ([out, in]), so only a float Conv1D is transposed
        return float_weight(weight).t() if self.conv1d and not _is_int8(weight) else float_weight(weight)


def _is_int8(weight: torch.Tensor) -> bool:
    return weight.dtype == torch.int8 and getattr(weight, "SCB", None) is not None


def float_weight(weight: torch.Tensor) -> torch.Tensor:
    """A projection's weight as the float32 matrix the layer applies. bitsandbytes' LLM.int8 `Int8Params` hold
    int8 codes with one scale per output row (`SCB`, the row's absolute maximum): the weight is codes * SCB / 127,
    bitsandbytes' own `int8_vectorwise_dequant`; the codes alone would scale every row of W_O differently. Any
    other non-float storage (4-bit) is refused in one line rather than read as numbers it does not hold."""
    if _is_int8(weight):
        from bitsandbytes.functional import int8_vectorwise_dequant

        return int8_vectorwise_dequant(weight.data, weight.SCB).float()  # type: ignore[attr-defined]  # [out, in]
    if not weight.is_floating_point():
        raise ScoringError(
            f"the output projection's weight is stored as {weight.dtype} ({type(weight).__name__}), which fhon cannot "
            "read as a matrix; load the model with float weights or 8-bit (LLM.int8) weights"
        )
    return weight.detach().float()


_SEPARATE = "v_proj, one d_head slice per KV head"
FAMILIES: dict[str, FamilyAdapter] = {
    "olmo2": FamilyAdapter("OLMo-2", "o_proj", _SEPARATE),
    "olmo": FamilyAdapter("OLMo (1)", "o_proj", _SEPARATE + ", clipped to +-clip_qkv when set"),
    "llama": FamilyAdapter("Llama", "o_proj", _SEPARATE),
    "qwen2": FamilyAdapter("Qwen2", "o_proj", _SEPARATE),
    "mistral": FamilyAdapter("Mistral", "o_proj", _SEPARATE),
    "gemma2": FamilyAdapter("Gemma-2", "o_proj", _SEPARATE),
    "olmo3": FamilyAdapter("OLMo-3", "o_proj", _SEPARATE),
    "olmoe": FamilyAdapter("OLMoE", "o_proj", _SEPARATE + ", clipped to +-clip_qkv when set"),
    "qwen3": FamilyAdapter("Qwen3", "o_proj", _SEPARATE),
    "gemma3_text": FamilyAdapter("Gemma-3", "o_proj", _SEPARATE),  # Gemma3ForCausalLM and the multimodal model's text
    "smollm3": FamilyAdapter("SmolLM3", "o_proj", _SEPARATE),
    "gpt_neox": FamilyAdapter(
        "GPT-NeoX (Pythia)", "dense", "fused query_key_value, the last third of each head's slice"
    ),
    "gpt2": FamilyAdapter("GPT-2", "c_proj", "fused c_attn, the last third of its output", conv1d=True),
}


def _family_names() -> str:
    return ", ".join(sorted({a.family for a in FAMILIES.values()}))


def unsupported_feature(config) -> str | None:
    """The attention feature of `config` that the engine does not implement, in words, or None."""
    softcap = getattr(config, "attn_logit_softcapping", None)
    if softcap is not None:
        return f"attention logit soft-capping (attn_logit_softcapping={softcap})"
    if getattr(config, "add_cross_attention", False):
        return "cross-attention (add_cross_attention=True)"
    if getattr(config, "use_bidirectional_attention", False):
        return "bidirectional attention (use_bidirectional_attention=True)"
    window = getattr(config, "sliding_window", None)
    if getattr(config, "model_type", None) == "olmoe" and window is not None:
        # OlmoeModel builds a plain causal mask but its layers pass config.sliding_window on: sdpa and eager
        # attend to everything, flash attention to the window, so "the layer's attention" has no one meaning
        return f"a sliding window that only some attention implementations apply (OLMoE with sliding_window={window})"
    return None


def adapter_for(model) -> FamilyAdapter:
    """The adapter of `model`'s family; ScoringError (one line) for an unknown family or a refused feature."""
    config = model.config.get_text_config()
    model_type = getattr(config, "model_type", None)
    adapter = FAMILIES.get(str(model_type))
    name = type(model).__name__
    if adapter is None:
        raise ScoringError(
            f"{name} (model_type {model_type!r}) is not a family the score engine knows, so its heads are not "
            f"scored; supported: {_family_names()}"
        )
    feature = unsupported_feature(config)
    if feature is not None:
        raise ScoringError(
            f"{name} uses {feature}, which the score engine does not implement; its scores would describe a "
            "different attention, so it is not scored"
        )
    return adapter


# Families whose modeling file applies `sliding_window` to every layer, whatever `layer_types` says (it reads
# `config.sliding_window` in each attention module, never the layer's type).
_WINDOW_ON_EVERY_LAYER = frozenset({"mistral", "mixtral", "qwen3_moe", "qwen2_moe", "phi3", "phimoe", "starcoder2"})


def layer_windows(config) -> tuple[int | None, ...]:
    """Each layer's sliding window in tokens (a query at i attends to keys i - window + 1 .. i, itself included,
    as transformers' `sliding_window_overlay` masks), None for a full-attention layer: what the model's own
    attention applies. Read from the text config: `layer_types` ("sliding_attention" / "full_attention") with
    `sliding_window` (OLMo-3, Gemma-2/3, Qwen2/3, SmolLM3); transformers derives `layer_types` from the older
    fields when it loads an older config.json (Qwen2's `max_window_layers`, Gemma-2's alternation, Gemma-3's
    `sliding_window_pattern`). `use_sliding_window=False` (Qwen2/3, SmolLM3) turns every window off; Mistral-like
    families window every layer."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    n_layers = int(text.num_hidden_layers)
    window = getattr(text, "sliding_window", None)
    if window is None or getattr(text, "use_sliding_window", True) is False:
        return (None,) * n_layers
    types = getattr(text, "layer_types", None)
    if types is None or getattr(text, "model_type", None) in _WINDOW_ON_EVERY_LAYER:
        return (int(window),) * n_layers
    return tuple(int(window) if kind == "sliding_attention" else None for kind in types[:n_layers])


__all__ = ["FAMILIES", "FamilyAdapter", "adapter_for", "float_weight", "layer_windows", "unsupported_feature"]
