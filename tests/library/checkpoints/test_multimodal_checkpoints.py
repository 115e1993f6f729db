"""Multimodal checkpoints: Gemma-3's (Gemma3ForConditionalGeneration) load as their language model alone, whose
text forward is the whole model's; those transformers does not load as a causal LM are refused in one line."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as tf

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.engine import layer_windows
from dormant_tasks.errors import CheckpointError

TEXT = "The trophy does not fit into the suitcase because it is too large."


def gemma3_multimodal(tokenizer, folder):
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=256,
        sliding_window=8,
        sliding_window_pattern=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    vision = dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14
    )
    torch.manual_seed(0)
    config = tf.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4)
    model = tf.Gemma3ForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def test_a_gemma3_multimodal_checkpoint_loads_as_its_text_model(tmp_path, tiny_tokenizer):
    whole = gemma3_multimodal(tiny_tokenizer, tmp_path / "gemma3-mm")
    model, tokenizer = load_model_and_tokenizer(tmp_path / "gemma3-mm", None, "float32", "cpu")
    assert type(model).__name__ == "Gemma3ForCausalLM" and model.config.model_type == "gemma3_text"
    assert not any("vision" in name for name, _ in model.named_parameters())  # the vision tower is not held
    ids = tokenizer(TEXT, return_tensors="pt")
    assert ids["input_ids"].shape[1] > 8  # longer than the window: the windowed layers differ from full ones
    with torch.no_grad():
        assert torch.equal(model(**ids).logits, whole(**ids).logits)  # the same language model, the same weights
    assert layer_windows(model.config) == (8, None, 8, None)
    from dormant_tasks.engine import ScoringOptions, score_texts

    awft = score_texts(model, tokenizer, [TEXT], ScoringOptions(("awft",))).get("awft")  # [input, layer, head]
    assert bool(torch.isfinite(torch.as_tensor(awft)).all())


def test_a_multimodal_checkpoint_transformers_cannot_load_as_a_causal_lm_is_one_line(tmp_path, tiny_tokenizer):
    """LLaVA has no AutoModelForCausalLM class: refused naming the fix (score the language model's own checkpoint)."""
    folder = tmp_path / "llava"
    text = dict(
        model_type="llama",
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
    )
    vision = dict(
        model_type="clip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2
    )
    tf.LlavaConfig(text_config=text, vision_config=vision).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "llava"
    with pytest.raises(CheckpointError) as e:
        load_model_and_tokenizer(folder, None, "float32", "cpu")
    message = str(e.value)
    assert "\n" not in message and "multimodal checkpoint (model_type 'llava')" in message
    assert "score a text-only checkpoint of its language model" in message
