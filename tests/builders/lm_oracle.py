"""Oracles of the intervention evaluation (docs/SCORES.md §6) on lm-eval requests: a plain forward of the model
(its own attention, no score engine) on each request alone, and static zeroing by o_proj forward pre-hooks."""

from __future__ import annotations

import torch


def plain_loglikelihood(model, context_ids, continuation_ids) -> float:
    """log P(continuation | context) from one unbatched plain forward."""
    ids = torch.tensor([list(context_ids) + list(continuation_ids)])[:, :-1]
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()  # [seq, vocab]
    logp = torch.log_softmax(logits[-len(continuation_ids) :], -1)
    return float(logp.gather(-1, torch.tensor(continuation_ids)[:, None]).sum())


def oracle_items(model, prepared, leaf) -> dict[int, list[float]]:
    """doc_id -> per-choice log-likelihoods of the prepared task `leaf`, one unbatched plain forward per request."""
    lm = prepared.lm
    out: dict[int, list[float]] = {}
    for inst in sorted(prepared.instances[leaf], key=lambda i: (i.doc_id, i.idx)):
        ctx, cont = lm._encode_pair(*inst.args)
        out.setdefault(inst.doc_id, []).append(plain_loglikelihood(model, ctx, cont))
    return out


def zeroing_hooks(model, heads) -> list:
    """o_proj forward pre-hooks that zero each (layer, head) of `heads`: its d_head slice of the projection's
    input. Returns the handles (remove them after)."""
    config = model.config.get_text_config()
    d_head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    layers = model.model.layers

    def hook_for(layer):
        def hook(module, args):
            x = args[0].clone()  # [batch, seq, head * d_head]
            for zeroed_layer, h in heads:
                if zeroed_layer == layer:
                    x[..., h * d_head : (h + 1) * d_head] = 0
            return (x,)

        return hook

    return [layers[i].self_attn.o_proj.register_forward_pre_hook(hook_for(i)) for i in range(len(layers))]
