"""Drift tests of the engine's two adapters of third-party internals (docs/DEVELOPING.md, "Third-party internals"):
each fails naming the installed version, so an upgrade that moves an internal is seen here, not as wrong scores.

- `cpu_attention_adapter`: torch's private fused CPU attention op, used only when its schema and its results are
  the ones the engine relies on; any other op (or none) is refused with the reason, and the engine falls back to
  the public sdpa (tests/library/engine/test_new_families.py scores with the op switched off).
- `attention_impl_adapter`: transformers' answer to "does this model's attention go through AttentionInterface"
  and its current attention implementation.
"""

from __future__ import annotations

import torch
import transformers
from transformers import BloomConfig, BloomForCausalLM

from dormant_tasks.engine import attention
from dormant_tasks.engine.attention_impl_adapter import attention_implementation, goes_through_attention_interface
from dormant_tasks.engine.cpu_attention_adapter import OP_NAME, fused_cpu_attention, refusal
from tests.builders.families import make_model

TORCH = f"torch {torch.__version__}"
TRANSFORMERS = f"transformers {transformers.__version__}"


def test_the_fused_cpu_op_is_there_with_the_schema_and_results_the_engine_relies_on():
    op = getattr(torch.ops.aten, OP_NAME, None)
    reason = refusal(op)
    assert reason is None, f"{reason}: fix dormant_tasks/engine/cpu_attention_adapter.py ({TORCH})"
    assert fused_cpu_attention() is op and attention._FUSED_CPU is op  # the engine's CPU path uses it


def test_another_op_or_none_is_refused_with_the_reason():
    assert "has no aten." in refusal(None)
    # a real op with other arguments (the math sdpa: no is_causal-then-keywords layout, other results)
    other = torch.ops.aten._scaled_dot_product_attention_math
    assert "schema" in refusal(other)

    class Wrong:  # the schema of the real op, the results of another computation
        default = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default

        def __call__(self, q, k, v, dropout_p, is_causal, **kw):
            out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, False, **kw)
            return out, lse

    assert "no longer returns" in refusal(Wrong())


def test_the_attention_implementation_is_read_and_swapped_as_transformers_does(tiny_tokenizer):
    model = make_model("olmo2", tiny_tokenizer)
    drift = f"{TRANSFORMERS}: fix dormant_tasks/engine/attention_impl_adapter.py"
    assert goes_through_attention_interface(model), drift
    assert attention_implementation(model) == "sdpa", drift
    model.set_attn_implementation("eager")
    assert attention_implementation(model) == "eager", drift
    bloom = BloomForCausalLM(BloomConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, n_layer=2, n_head=4))
    assert not goes_through_attention_interface(bloom), drift  # its own attention code: cannot be scored
