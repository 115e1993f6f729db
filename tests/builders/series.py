"""Checkpoint series on disk: random-init models saved as a local series, one seed per branch name."""

from __future__ import annotations

from dormant_tasks.tiny import tiny_config


def save_random_series(folder, tokenizer, names, n_layers=2, n_heads=4, hidden_size=64):
    """Random-init tiny OLMo-2 checkpoints (one seed each) saved as a local series under OLMo-2 branch names."""
    import torch
    from transformers import Olmo2ForCausalLM

    for seed, name in enumerate(names):
        torch.manual_seed(seed)
        model = Olmo2ForCausalLM(tiny_config(tokenizer, n_layers=n_layers, n_heads=n_heads, hidden_size=hidden_size))
        model.save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
    return folder


def save_model_series(folder, tokenizer, names, build):
    """A local series of random-init checkpoints of any family: `build()` makes one model, after a seed per name."""
    import torch

    for seed, name in enumerate(names):
        torch.manual_seed(seed)
        build().save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
    return folder
