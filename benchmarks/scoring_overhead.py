"""Cost of scoring every head in one pass, side by side with a plain forward pass and the naive way.

Model: an OLMo-2 config of 8 layers x 8 heads, width 512 (vocab 1,024), RANDOMLY initialised (timing and
memory do not depend on the weights). Inputs: one sequence (batch 1) of 512 and of 2,048 tokens, float32, CPU.

Variants
  (a) plain:  `model(input_ids)` with the default sdpa attention, under no_grad.
  (b) naive:  eager attention with `output_attentions=True` plus hooks on v_proj and the o_proj input, all 15
              scores computed afterwards from the returned tensors (vectorised, full per-head W_O projection).
  (c) ours:   `dormant_tasks.scoring.scoring_pass` with all 16 functions.

Time: median wall time of REPEATS runs after one warm-up run.
Peak memory: each (variant, length) runs in its own fresh subprocess. After building the model and inputs,
the process resets its kernel peak-RSS counter (`echo 5 > /proc/self/clear_refs`, which resets VmHWM) and
notes its current RSS; the figure is VmHWM after the warm-up and timed runs minus that baseline, i.e. the
extra resident memory the pass needs on top of the loaded model (allocator caching included, as a user sees it).
tracemalloc cannot see torch's allocations, hence this.

Run: .venv/bin/python benchmarks/scoring_overhead.py   (other jobs on the machine add noise: run it twice)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

LENGTHS = (512, 2048)
VARIANTS = ("plain", "naive", "ours")
REPEATS = 3


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def build(length: int):
    import torch
    from transformers import Olmo2Config, Olmo2ForCausalLM

    torch.manual_seed(0)
    config = Olmo2Config(
        vocab_size=1024,
        hidden_size=512,
        intermediate_size=2048,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = Olmo2ForCausalLM(config).eval()
    ids = torch.randint(1, 1024, (1, length))  # [1, seq]
    return model, ids


def naive_pass(model, ids):
    """Eager attention + output_attentions + hooks, scores from the returned tensors afterwards."""
    import torch

    values, outputs, hooks = {}, {}, []
    for i, layer in enumerate(model.model.layers):
        hooks.append(layer.self_attn.v_proj.register_forward_hook(lambda m, a, out, i=i: values.__setitem__(i, out)))
        hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(lambda m, a, i=i: outputs.__setitem__(i, a[0])))
    try:
        out = model(input_ids=ids, output_attentions=True, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    n_heads = model.config.num_attention_heads
    scores = []
    for i, layer in enumerate(model.model.layers):
        a = out.attentions[i][0]  # [head, seq, seq]
        v = values[i][0].view(ids.shape[1], n_heads, -1)  # [seq, head, d]
        o = outputs[i][0].view(ids.shape[1], n_heads, -1)  # [seq, head, d]
        w = layer.self_attn.o_proj.weight.view(-1, n_heads, v.shape[-1])  # [width, head, d]
        raw = {
            "awft": a[..., 0].mean(-1),
            "aeqd": -torch.special.xlogy(a, a).sum(-1).mean(-1),
            "ftvvn": v[0].norm(dim=-1),
            "avvn": v.norm(dim=-1).mean(0),
            "lthon": o[-1].norm(dim=-1),
            "ahon": o.norm(dim=-1).mean(0),
            "fhon": torch.einsum("shd,whd->hsw", o, w).norm(dim=-1).mean(-1),  # full projection per head
        }
        ln = {f"{k}_ln": x / x.mean() for k, x in raw.items() if k != "lthon"}
        scores.append(
            {**raw, **ln, "lthon_ln": raw["lthon"] / raw["ahon"].mean(), "lthon_hn": raw["lthon"] / raw["ahon"]}
        )
    return out.logits, scores


def child(variant: str, length: int) -> dict:
    import torch

    from dormant_tasks.scoring import scoring_pass

    model, ids = build(length)
    mask = torch.ones_like(ids)
    if variant == "naive":
        model.set_attn_implementation("eager")
    run = {
        "plain": lambda: model(input_ids=ids, use_cache=False).logits,
        "naive": lambda: naive_pass(model, ids),
        "ours": lambda: scoring_pass(model, ids, mask),
    }[variant]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak-RSS counter (VmHWM) to the current RSS
    base = _status_kib("VmRSS")
    times = []
    with torch.no_grad():
        run()  # warm-up
        for _ in range(REPEATS):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return {"seconds": statistics.median(times), "peak_mib": (_status_kib("VmHWM") - base) / 1024}


def main() -> None:
    import torch

    print(
        f"OLMo-2 8 layers x 8 heads, width 512, random init, batch 1, float32, CPU, "
        f"{torch.get_num_threads()} threads, median of {REPEATS}"
    )
    results = {}
    for length in LENGTHS:
        for variant in VARIANTS:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", variant, str(length)], capture_output=True, text=True, check=True
            )
            results[variant, length] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{'tokens':>6} {'variant':>7} {'seconds':>9} {'peak MiB':>9} {'time/plain':>11} {'mem/plain':>10}")
    for length in LENGTHS:
        plain = results["plain", length]
        for variant in VARIANTS:
            r = results[variant, length]
            print(
                f"{length:>6} {variant:>7} {r['seconds']:>9.3f} {r['peak_mib']:>9.1f} "
                f"{r['seconds'] / plain['seconds']:>10.2f}x {r['peak_mib'] / plain['peak_mib']:>9.2f}x"
            )
        ours, naive = results["ours", length], results["naive", length]
        print(
            f"{length:>6} naive/ours: time {naive['seconds'] / ours['seconds']:.2f}x, "
            f"memory {naive['peak_mib'] / ours['peak_mib']:.2f}x"
        )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
