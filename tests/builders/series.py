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


def save_interpolated_series(folder, tokenizer, seeds, per_segment, n_layers=2, n_heads=4, hidden_size=64):
    """A dense local series: random-init tiny OLMo-2 anchors (one per seed) and, between each two, `per_segment`
    checkpoints whose weights lie on the straight line between them (the anchors included once each): real
    checkpoints whose heads change state along the way, as between pretraining checkpoints. Branch names
    `stage1-step{10 i}-tokens{20 i}K`. Returns (folder, names in series order)."""
    import torch
    from transformers import Olmo2ForCausalLM

    anchors = []
    for seed in seeds:
        torch.manual_seed(seed)
        model = Olmo2ForCausalLM(tiny_config(tokenizer, n_layers=n_layers, n_heads=n_heads, hidden_size=hidden_size))
        anchors.append({k: v.clone() for k, v in model.state_dict().items()})
    names = []
    points = [(a, t / per_segment) for a in range(len(anchors) - 1) for t in range(per_segment)]
    points.append((len(anchors) - 2, 1.0))
    for i, (a, t) in enumerate(points):
        state = {k: (1 - t) * anchors[a][k] + t * anchors[a + 1][k] for k in anchors[a]}
        model.load_state_dict(state)
        name = f"stage1-step{10 * i}-tokens{20 * i}K"
        model.save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
        names.append(name)
    return folder, names
