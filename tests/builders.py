"""Builders the tests of several folders share (imported as `builders`: tests/ is on sys.path through its
conftest). Kept out of conftest.py: tests/integration has a conftest of its own, so `from builders import`
would find whichever conftest was imported first."""

from __future__ import annotations

from pathlib import Path

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


def stored_checkpoints(store) -> int:
    """Rows of the store's manifests, read as a watcher of a running `dormant track` may: each manifest is
    replaced whole (by rename) and exists, empty, before a series' first result, so count rows, not files."""
    import pyarrow.parquet as pq

    folder = Path(store) / "checkpoints"
    return sum(pq.read_metadata(p).num_rows for p in folder.rglob("*.parquet")) if folder.exists() else 0
