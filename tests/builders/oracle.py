"""Brute-force oracle of the docs/SCORES.md §2 score functions and of docs/SCORES.md §6 dynamic zeroing, for ONE unpadded input.

Independent of the engine's tricks: eager attention with `output_attentions=True` gives every A[h] in full (with
the model's own masks: a sliding layer's A[h] is 0 outside its window, as transformers builds it),
a forward hook on the value projection gives the value vectors, a forward pre-hook on the output projection
gives (and, for interventions, zeroes) the head outputs o[h,i]; each definition is then evaluated literally in
float64, head by head, with the full projection o W_O[h]^T for fhon (no Gram matrix).

Where those projections are is written out here per family, apart from the engine's adapters
(dormant_tasks/engine/adapters.py), which never see the value projection at all:
- separate q/k/v (OLMo-2, OLMo-1, Llama, Qwen2, Mistral, Gemma-2, OLMo-3, OLMoE, Qwen3, Gemma-3, SmolLM3):
  `v_proj` output, clamped to +-clip_qkv where the config sets it (OLMo-1 and OLMoE clip q, k and v before
  attention), and `o_proj`; a multimodal model's (Gemma-3's) layers are those of its `language_model`;
- GPT-NeoX: the fused `query_key_value` output, laid out [seq, head, (q, k, v) x d_head], and `dense`;
- GPT-2: the fused Conv1D `c_attn` output, laid out [seq, (q, k, v) x width], and the Conv1D `c_proj`, whose
  weight is stored [in, out] (W_O is its transpose).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from dormant_tasks.engine.score_functions import DETERMINISTIC_IDS, get_score_function


@dataclass
class OracleRun:
    scores: dict[str, np.ndarray]  # score_fn -> [layer, head] float64, from the pre-zeroing head outputs
    logits: torch.Tensor  # [seq, vocab]
    o_proj_inputs: list[torch.Tensor]  # per layer [seq, head * d_head] as o_proj received it (after zeroing)


def _ratio(x: float, den: float) -> float:
    return float("nan") if den == 0 else x / den


def _layer_scores(attn: np.ndarray, v: np.ndarray, o: np.ndarray, w_o: np.ndarray) -> dict[str, np.ndarray]:
    """attn [head, seq, seq]; v [seq, head, d] (after GQA repeat); o [seq, head, d]; w_o [width, head * d]."""
    n_heads, seq, _ = attn.shape
    d = o.shape[-1]
    raw = {name: np.zeros(n_heads) for name in ("awft", "aeqd", "ftvvn", "avvn", "lthon", "ahon", "fhon")}
    for h in range(n_heads):
        a = attn[h]
        raw["awft"][h] = sum(a[i, 0] for i in range(seq)) / seq
        entropies = []
        for i in range(seq):
            row = a[i, : i + 1]
            entropies.append(-sum(p * np.log(p) for p in row if p > 0))  # 0 ln 0 = 0
        raw["aeqd"][h] = sum(entropies) / seq
        raw["ftvvn"][h] = np.linalg.norm(v[0, h])
        raw["avvn"][h] = sum(np.linalg.norm(v[j, h]) for j in range(seq)) / seq
        raw["lthon"][h] = np.linalg.norm(o[seq - 1, h])
        raw["ahon"][h] = sum(np.linalg.norm(o[i, h]) for i in range(seq)) / seq
        w_h = w_o[:, h * d : (h + 1) * d]  # [width, d]
        raw["fhon"][h] = sum(np.linalg.norm(o[i, h] @ w_h.T) for i in range(seq)) / seq
    out = dict(raw)
    for name in ("awft", "aeqd", "ftvvn", "avvn", "ahon", "fhon"):
        out[f"{name}_ln"] = np.array([_ratio(raw[name][h], raw[name].mean()) for h in range(n_heads)])
    out["lthon_ln"] = np.array([_ratio(raw["lthon"][h], raw["ahon"].mean()) for h in range(n_heads)])
    out["lthon_hn"] = np.array([_ratio(raw["lthon"][h], raw["ahon"][h]) for h in range(n_heads)])
    return out


def _attention_modules(model) -> list:
    if model.config.model_type == "gpt_neox":
        return [layer.attention for layer in model.gpt_neox.layers]
    if model.config.model_type == "gpt2":
        return [block.attn for block in model.transformer.h]
    text = getattr(model.model, "language_model", model.model)  # a multimodal model's text decoder (Gemma-3)
    return [layer.self_attn for layer in text.layers]


def _value_site(model, attn):
    """(module whose output holds the values, output [seq, out] -> values [seq, kv_head, d])."""
    config = model.config.get_text_config()
    n_heads = config.num_attention_heads
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    if config.model_type == "gpt_neox":
        return attn.query_key_value, lambda out: out.view(out.shape[0], n_heads, 3, -1)[:, :, 2]
    if config.model_type == "gpt2":
        width = config.hidden_size
        return attn.c_attn, lambda out: out[:, 2 * width :].reshape(out.shape[0], n_heads, -1)
    clip = getattr(config, "clip_qkv", None)
    return attn.v_proj, lambda out: (out if clip is None else out.clamp(-clip, clip)).view(out.shape[0], n_kv, -1)


def _output_projection(model, attn):
    """(module, W_O as [width, head * d] float64 numpy)."""
    if model.config.model_type == "gpt_neox":
        return attn.dense, attn.dense.weight.double().cpu().numpy()
    if model.config.model_type == "gpt2":
        return attn.c_proj, attn.c_proj.weight.double().cpu().numpy().T  # Conv1D weight: [head * d, width]
    return attn.o_proj, attn.o_proj.weight.double().cpu().numpy()


@torch.no_grad()
def oracle_run(model, input_ids, zero: dict[int, set[int]] | None = None) -> OracleRun:
    """All 15 deterministic scores of one input; heads in `zero` ({layer: {head}}) are zeroed before o_proj."""
    zero = zero or {}
    config = model.config
    n_heads = config.get_text_config().num_attention_heads
    layers = _attention_modules(model)
    values, o_inputs, o_zeroed, hooks = {}, {}, {}, []

    def v_hook(layer, to_values):
        def hook(module, args, output):
            values[layer] = to_values(output[0].double().cpu())  # [seq, kv_head, d]

        return hook

    def o_hook(layer):
        def hook(module, args):
            x = args[0]  # [1, seq, head * d]
            o_inputs[layer] = x[0].double().cpu()
            if zero.get(layer):
                x = x.clone()
                d = x.shape[-1] // n_heads
                for h in zero[layer]:
                    x[..., h * d : (h + 1) * d] = 0
            o_zeroed[layer] = x[0].clone()
            return (x,)

        return hook

    for i, attn in enumerate(layers):
        v_module, to_values = _value_site(model, attn)
        hooks.append(v_module.register_forward_hook(v_hook(i, to_values)))
        hooks.append(_output_projection(model, attn)[0].register_forward_pre_hook(o_hook(i)))
    previous = config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        ids = torch.as_tensor(input_ids).reshape(1, -1)
        out = model(input_ids=ids, output_attentions=True, use_cache=False)
    finally:
        model.set_attn_implementation(previous)
        for hook in hooks:
            hook.remove()

    seq = ids.shape[1]
    per_layer = []
    for i, module in enumerate(layers):
        attn = out.attentions[i][0].double().cpu().numpy()  # [head, seq, seq]
        v = values[i].numpy()  # [seq, kv_head, d]
        v = np.repeat(v, n_heads // v.shape[1], axis=1)  # [seq, head, d]: head h reads KV head h // (H / KV)
        o = o_inputs[i].view(seq, n_heads, -1).numpy()  # [seq, head, d]
        w_o = _output_projection(model, module)[1]  # [width, head * d]
        per_layer.append(_layer_scores(attn, v, o, w_o))
    scores = {fn: np.stack([s[fn] for s in per_layer]) for fn in DETERMINISTIC_IDS}
    return OracleRun(scores, out.logits[0], [o_zeroed[i] for i in range(len(layers))])


def oracle_dynamic(model, input_ids, score_fn: str, tau: float):
    """docs/SCORES.md §6 dynamic zeroing, layer by layer: run l decides layer l's heads with layers < l already zeroed.

    Returns (scores {fn: [layer, head]} from each layer's deciding run, zeroed bool [layer, head], logits [seq, vocab]).
    """
    direction = get_score_function(score_fn).direction
    text = model.config.get_text_config()
    n_layers, n_heads = text.num_hidden_layers, text.num_attention_heads
    zero: dict[int, set[int]] = {}
    scores = {fn: np.zeros((n_layers, n_heads)) for fn in DETERMINISTIC_IDS}
    for layer in range(n_layers):
        run = oracle_run(model, input_ids, zero)
        for fn in DETERMINISTIC_IDS:
            scores[fn][layer] = run.scores[fn][layer]
        s = run.scores[score_fn][layer]
        zero[layer] = {h for h in range(len(s)) if (s[h] > tau if direction == ">" else s[h] < tau)}
    final = oracle_run(model, input_ids, zero)
    zeroed = np.zeros((n_layers, n_heads), dtype=bool)
    for layer, heads in zero.items():
        zeroed[layer, list(heads)] = True
    return scores, zeroed, final.logits


# How close the engine must come to the oracle.
RTOL = 1e-5
# A bfloat16 model against the oracle run on that same bfloat16 model: the engine's sdpa output and the oracle's
# eager output round differently (bf16 eps 2^-8) and the difference grows through the layers; the largest
# relative gap seen on CPU is 0.7% (lthon), entropy and first-token weight stay under 0.4%.
RTOL_BF16 = 0.03
DTYPES = {"float32": (torch.float32, RTOL), "bfloat16": (torch.bfloat16, RTOL_BF16)}


def assert_scores_close(got: dict, want: dict, rtol=RTOL, fns=DETERMINISTIC_IDS):
    for fn in fns:
        np.testing.assert_allclose(got[fn], want[fn], rtol=rtol, atol=0, err_msg=fn)
