"""Checkpoints that cannot be scored honestly are refused in one line, naming why (issue: nothing lost, second
pass): a config that cannot be a model (torch would die of a floating-point exception), and NaN or Inf weights
(their heads would score NaN and be counted active)."""

from __future__ import annotations

import json
import shutil

import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.errors import CheckpointError


def copy_with_config(src, dst, **changes):
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config.update(changes)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"num_key_value_heads": 8}, "num_attention_heads 4 is not a positive multiple of num_key_value_heads 8"),
        ({"num_key_value_heads": 3}, "num_attention_heads 4 is not a positive multiple of num_key_value_heads 3"),
        ({"hidden_size": 66}, "hidden_size 66 is not divisible by num_attention_heads 4"),
        ({"num_hidden_layers": 0}, "num_hidden_layers 0 (a model has at least one layer"),
    ],
)
def test_a_config_that_cannot_be_a_model_is_refused_before_loading(tiny_model_dir, tmp_path, changes, why):
    bad = copy_with_config(tiny_model_dir, tmp_path / "bad", **changes)
    with pytest.raises(CheckpointError, match="its config.json cannot be a model") as e:
        load_model_and_tokenizer(bad)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_nan_weights_are_refused_naming_the_tensor(tiny_model_dir, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    bad = tmp_path / "nan"
    shutil.copytree(tiny_model_dir, bad)
    (weights,) = bad.glob("*.safetensors")
    tensors = load_file(weights)
    name = next(k for k in tensors if k.endswith("layers.1.self_attn.o_proj.weight"))
    tensors[name][0, 0] = float("nan")
    save_file(tensors, weights, metadata={"format": "pt"})
    with pytest.raises(
        CheckpointError, match=r"weight model\.layers\.1\.self_attn\.o_proj\.weight holds NaN or Inf"
    ) as e:
        load_model_and_tokenizer(bad)
    assert str(e.value).startswith(f"{bad}: weight ")  # its own line, not wrapped as "not a loadable causal LM"
    model, _ = load_model_and_tokenizer(tiny_model_dir)  # the whole one loads
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
