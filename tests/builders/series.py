"""Checkpoint series on disk: random-init models saved as a local series, one seed per branch name."""

from __future__ import annotations

from dormant_tasks.tiny import tiny_config


def save_random_series(folder, tokenizer, names, n_layers=2, n_heads=4, hidden_size=64, first_seed=0):
    """Random-init tiny OLMo-2 checkpoints (one seed each, from `first_seed`) saved as a local series under OLMo-2
    branch names. Checkpoints added to a series later take a `first_seed` past its own: the same seed twice is a
    copy, which the integrity audit sets aside."""
    import torch
    from transformers import Olmo2ForCausalLM

    for seed, name in enumerate(names, start=first_seed):
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
