"""Adapter: torch's private fused CPU attention op, the one torch internal the score engine uses.

`torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, *,
attn_mask=None, scale=None) -> (output, logsumexp)` is the kernel behind the public
`scaled_dot_product_attention` on CPU; unlike the public function it also returns each query's log-sum-exp,
which gives the entropy and the first-token weight without a second softmax (engine/attention.py). It is private:
a torch release may drop it or change its arguments. `fused_cpu_attention()` returns it only when its schema is
the one the engine calls (the argument names, kinds and order, two tensors back) and it agrees with the public
sdpa on a small causal input; else None, and the engine takes the public sdpa and explicit float32 softmax rows
(slower, the same scores). The drift test (tests/library/engine/test_cpu_attention_adapter.py) fails, naming the
installed torch, when the op is missing or refused, so a release that moves it is seen, not silently slower.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

OP_NAME = "_scaled_dot_product_flash_attention_for_cpu"
# (name, keyword-only, type) of each argument, in order, as the engine calls the op (positionally up to is_causal)
SCHEMA = (
    ("query", False, "Tensor"),
    ("key", False, "Tensor"),
    ("value", False, "Tensor"),
    ("dropout_p", False, "float"),
    ("is_causal", False, "bool"),
    ("attn_mask", True, "Optional[Tensor]"),
    ("scale", True, "Optional[float]"),
)


def schema_of(op: Any) -> tuple[tuple[tuple[str, bool, str], ...], int] | None:
    """((name, keyword-only, type) per argument, number of results) of an op's default overload; None if unreadable."""
    try:
        schema = op.default._schema
        return tuple((a.name, bool(a.kwarg_only), str(a.type)) for a in schema.arguments), len(schema.returns)
    except (AttributeError, RuntimeError):
        return None


def refusal(op: Any) -> str | None:
    """Why the engine does not use `op` (one phrase), or None when it may."""
    if op is None:
        return f"torch {torch.__version__} has no aten.{OP_NAME}"
    found = schema_of(op)
    if found != (SCHEMA, 2):
        return f"torch {torch.__version__}'s aten.{OP_NAME} has the schema {found}, not {(SCHEMA, 2)}"
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=g) for _ in range(3))  # [batch, head, seq, d]
    try:
        out, lse = op(q, k, v, 0.0, True, scale=0.5)  # [batch, head, seq, d], [batch, head, seq]
    except (RuntimeError, TypeError) as e:
        return f"torch {torch.__version__}'s aten.{OP_NAME} failed on a small input ({e})"
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    logits = 0.5 * q @ k.transpose(-1, -2)  # [batch, head, seq, seq]
    want_lse = logits.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf")).logsumexp(-1)  # [batch, head, seq]
    if lse.shape != want_lse.shape or not (torch.allclose(out, want, atol=1e-5) and torch.allclose(lse, want_lse)):
        return f"torch {torch.__version__}'s aten.{OP_NAME} no longer returns (attention, log-sum-exp)"
    return None


@functools.cache
def fused_cpu_attention() -> Any:
    """The op where this torch has it with the schema and results the engine relies on, else None."""
    op = getattr(torch.ops.aten, OP_NAME, None)
    return op if refusal(op) is None else None


__all__ = ["OP_NAME", "fused_cpu_attention", "refusal"]
