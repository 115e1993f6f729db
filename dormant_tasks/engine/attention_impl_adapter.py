"""Adapter: transformers' attention-implementation internals, which the engine needs to install its attention.

`scoring_pass` swaps a model's attention implementation for the scoring function for one pass and restores it
after. transformers sets it publicly (`set_attn_implementation`) but says neither whether a model's attention
goes through `AttentionInterface` at all (`PreTrainedModel._can_set_attn_implementation()`, a heuristic on the
modelling file's source) nor which implementation is set now (`config._attn_implementation`). This module, and
only this one, reads both. The drift test (tests/library/engine/test_attention_impl_adapter.py) fails, naming the
installed transformers, when either moves or answers otherwise on a tiny model.
"""

from __future__ import annotations

from typing import Any


def goes_through_attention_interface(model: Any) -> bool:
    """Whether the model's attention layers call the function `AttentionInterface` names (so it can be swapped)."""
    return bool(model._can_set_attn_implementation())


def attention_implementation(model: Any) -> Any:
    """The implementation the model's attention uses now (a name such as "sdpa", or a dict per sub-model)."""
    return model.config._attn_implementation


__all__ = ["attention_implementation", "goes_through_attention_interface"]
