"""Adapter: transformers' generation internals, which `DormantLM`'s greedy loop reads to decode as `generate` does
(no public way to get the generation config, end-of-text ids and logits processors without generating). Drift
test: tests/library/evaluation/test_generation_adapter.py.
"""

from __future__ import annotations

from typing import Any


def generation_config(model: Any, kwargs: dict, device: Any) -> Any:
    """The `GenerationConfig` that `model.generate(**kwargs)` would use, with its special tokens prepared.
    ValueError or TypeError for arguments that do not make one (transformers' own validation)."""
    config, _ = model._prepare_generation_config(None, **kwargs)
    model._prepare_special_tokens(config, True, device)
    return config


def eos_token_ids(config: Any) -> set[int]:
    """Every end-of-text id of a prepared config (its `eos_token_id` list, the tokenizer's default included)."""
    eos = config._eos_token_tensor
    return set() if eos is None else {int(t) for t in eos.reshape(-1).tolist()}


def logits_processors(model: Any, config: Any, prompt_length: int, device: Any) -> Any:
    """The `LogitsProcessorList` that `generate` builds for a prompt of `prompt_length` tokens."""
    return model._get_logits_processor(generation_config=config, input_ids_seq_length=prompt_length, device=device)


__all__ = ["eos_token_ids", "generation_config", "logits_processors"]
