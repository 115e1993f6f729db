"""`layer_windows`: each layer's sliding window as the model's own attention applies it. The oracle is behaviour,
not the config: with eager attention, the last query of an input longer than the window gives non-zero weight to
exactly `window` keys on a windowed layer and to every key on a full one (a softmax over random weights is never 0)."""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from dormant_tasks.engine import layer_windows

WINDOW, LENGTH, LAYERS = 5, 12, 4
COMMON = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=LAYERS,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)

# (config class, model class, extra config fields): the families of issue 40 and the older forms of a window
CASES = {
    "olmo3": (tf.Olmo3Config, tf.Olmo3ForCausalLM, dict(sliding_window=WINDOW)),  # its default: 3 of 4 windowed
    "olmo3 layer_types": (
        tf.Olmo3Config,
        tf.Olmo3ForCausalLM,
        dict(sliding_window=WINDOW, layer_types=["full_attention", "sliding_attention"] * 2),
    ),
    "gemma2 alternating": (tf.Gemma2Config, tf.Gemma2ForCausalLM, dict(sliding_window=WINDOW, head_dim=8)),
    "gemma3 pattern": (
        tf.Gemma3TextConfig,
        tf.Gemma3ForCausalLM,
        dict(sliding_window=WINDOW, head_dim=8, sliding_window_pattern=2),
    ),
    "qwen2 max_window_layers": (
        tf.Qwen2Config,
        tf.Qwen2ForCausalLM,
        dict(sliding_window=WINDOW, use_sliding_window=True, max_window_layers=1),
    ),
    "qwen2 off": (tf.Qwen2Config, tf.Qwen2ForCausalLM, dict(sliding_window=WINDOW, use_sliding_window=False)),
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(sliding_window=WINDOW, use_sliding_window=True, head_dim=8)),
    "smollm3 off": (tf.SmolLM3Config, tf.SmolLM3ForCausalLM, dict(sliding_window=WINDOW, use_sliding_window=False)),
    "smollm3 on": (
        tf.SmolLM3Config,
        tf.SmolLM3ForCausalLM,
        dict(sliding_window=WINDOW, use_sliding_window=True, no_rope_layers=[1, 0, 1, 0]),
    ),
    "mistral every layer": (tf.MistralConfig, tf.MistralForCausalLM, dict(sliding_window=WINDOW)),
    "mistral no window": (tf.MistralConfig, tf.MistralForCausalLM, dict(sliding_window=None)),
    "olmoe": (
        tf.OlmoeConfig,
        tf.OlmoeForCausalLM,
        dict(num_experts=4, num_experts_per_tok=2),  # no window: every layer full
    ),
}


def observed_windows(model) -> tuple[int | None, ...]:
    """Per layer: how many keys the last query of a LENGTH-token input attends to, as a window (None: all)."""
    ids = torch.arange(1, LENGTH + 1).unsqueeze(0)  # [batch 1, LENGTH]
    with torch.no_grad():
        attentions = model(input_ids=ids, output_attentions=True).attentions  # per layer [batch, head, query, key]
    out = []
    for a in attentions:
        seen = int((a[0, :, -1, :] > 0).sum(-1).max())  # keys with weight, over heads, of the last query
        out.append(None if seen == LENGTH else seen)
    return tuple(out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_windows_match_the_attention_the_model_applies(case):
    config_cls, model_cls, extra = CASES[case]
    torch.manual_seed(0)
    config = config_cls(**COMMON, **extra)
    config._attn_implementation = "eager"
    model = model_cls(config).eval()
    got = layer_windows(model.config)
    assert got == observed_windows(model), case
    assert len(got) == LAYERS


def test_the_families_windows_read_as_their_modeling_files_say():
    """The expected patterns, spelled out: OLMo-3 windows 3 layers in 4 (the 4th full), Gemma-2 every other one
    starting with the first, Qwen2 layers from max_window_layers on, Mistral every layer."""
    assert layer_windows(tf.Olmo3Config(**COMMON, sliding_window=WINDOW)) == (WINDOW, WINDOW, WINDOW, None)
    assert layer_windows(tf.Gemma2Config(**COMMON, sliding_window=WINDOW)) == (WINDOW, None, WINDOW, None)
    qwen2 = tf.Qwen2Config(**COMMON, sliding_window=WINDOW, use_sliding_window=True, max_window_layers=3)
    assert layer_windows(qwen2) == (None, None, None, WINDOW)
    mistral = tf.MistralConfig(**COMMON, sliding_window=WINDOW)
    assert layer_windows(mistral) == (WINDOW,) * LAYERS
    assert layer_windows(tf.LlamaConfig(**COMMON)) == (None,) * LAYERS


def test_a_multimodal_gemma3_config_gives_its_text_model_s_windows():
    text = tf.Gemma3TextConfig(**COMMON, sliding_window=WINDOW, head_dim=8, sliding_window_pattern=2)
    config = tf.Gemma3Config(text_config=text.to_dict())
    assert layer_windows(config) == (WINDOW, None, WINDOW, None)
