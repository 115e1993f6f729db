"""Cost of scoring every head in one pass, side by side with a plain forward pass and the naive way.

Model: an OLMo-2 config of 8 layers x 8 heads, width 512 (vocab 1,024), RANDOMLY initialised (timing and
memory do not depend on the weights). Inputs: one sequence (batch 1) of 512 and of 2,048 tokens, float32, CPU
by default (`--device cuda`, `--dtype bfloat16`, `--lengths`, `--repeats`, `--variants` change that).

Variants
  (a) plain:  `model(input_ids)` with the default sdpa attention, under no_grad.
  (b) naive:  eager attention with `output_attentions=True` plus hooks on v_proj and the o_proj input, all 15
              scores computed afterwards from the returned tensors (vectorised, full per-head W_O projection).
  (c) ours:   `dormant_tasks.engine.scoring.scoring_pass` with all 16 functions.

Time: median wall time of REPEATS runs after one warm-up run (on CUDA, synchronised before and after each run).
Peak memory: each (variant, length) runs in its own fresh subprocess. After building the model and inputs,
the process resets its kernel peak-RSS counter (`echo 5 > /proc/self/clear_refs`, which resets VmHWM) and
notes its current RSS; the figure is VmHWM after the warm-up and timed runs minus that baseline, i.e. the
extra resident memory the pass needs on top of the loaded model (allocator caching included, as a user sees it).
tracemalloc cannot see torch's allocations, hence this. On CUDA the figure is the peak of
`torch.cuda.max_memory_allocated` after the same runs minus the memory allocated before them (tensors only,
the allocator's cache left out).
The last line is `ours/plain time at N tokens: R.RRx` for the longest length (benchmarks/gpu_check.sh reads it).

Run: .venv/bin/python benchmarks/scoring_overhead.py   (other jobs on the machine add noise: run it twice)
     .venv/bin/python benchmarks/scoring_overhead.py --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

LENGTHS = (512, 2048)
VARIANTS = ("plain", "naive", "ours")
REPEATS = 3
DTYPES = ("float32", "bfloat16")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def build(length: int, device: str = "cpu", dtype: str = "float32"):
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
    model = Olmo2ForCausalLM(config).to(device=device, dtype=getattr(torch, dtype)).eval()
    ids = torch.randint(1, 1024, (1, length)).to(device)  # [1, seq]
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


def child(variant: str, length: int, device: str = "cpu", dtype: str = "float32", repeats: int = REPEATS) -> dict:
    import torch

    from dormant_tasks.engine.scoring import scoring_pass

    cuda = device.startswith("cuda")
    model, ids = build(length, device, dtype)
    mask = torch.ones_like(ids)
    if variant == "naive":
        model.set_attn_implementation("eager")
    run = {
        "plain": lambda: model(input_ids=ids, use_cache=False).logits,
        "naive": lambda: naive_pass(model, ids),
        "ours": lambda: scoring_pass(model, ids, mask),
    }[variant]
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 1024
    else:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS counter (VmHWM) to the current RSS
        base = _status_kib("VmRSS")
    times = []
    with torch.no_grad():
        run()  # warm-up
        for _ in range(repeats):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            run()
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 1024 if cuda else _status_kib("VmHWM")
    return {"seconds": statistics.median(times), "peak_mib": (peak - base) / 1024}


def _ratio(x: float, y: float) -> float:
    return x / y if y > 0 else float("nan")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="model dtype (default: %(default)s)")
    parser.add_argument(
        "--lengths",
        default=",".join(map(str, LENGTHS)),
        help="comma-separated input lengths in tokens (default: %(default)s)",
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="timed runs per case (default: %(default)s)")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated, among plain, naive, ours; plain is always run (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        args.lengths = tuple(int(x) for x in args.lengths.split(",") if x.strip())
    except ValueError:
        parser.error(f"--lengths must be comma-separated integers, got {args.lengths!r}")
    if not args.lengths or min(args.lengths) < 1 or max(args.lengths) > 4096:
        parser.error("--lengths must be between 1 and 4096 tokens (the model's max_position_embeddings)")
    wanted = {v.strip() for v in args.variants.split(",") if v.strip()}
    unknown = wanted - set(VARIANTS)
    if unknown:
        parser.error(f"unknown --variants {sorted(unknown)}; choose among {', '.join(VARIANTS)}")
    args.variants = tuple(v for v in VARIANTS if v in wanted | {"plain"})
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.device != "cpu" and not args.device.startswith("cuda"):
        parser.error(f"unknown --device {args.device!r}; use cpu, cuda or cuda:N")
    return args


def main(argv=None) -> None:
    import torch

    args = parse_args(argv)
    if args.device.startswith("cuda"):
        if not torch.cuda.is_available():
            sys.exit(
                f"--device {args.device} asked for, but torch {torch.__version__} sees no CUDA GPU; use --device cpu"
            )
        where = f"CUDA ({torch.cuda.get_device_name(torch.device(args.device))})"
    else:
        where = f"CPU, {torch.get_num_threads()} threads"
    print(
        f"OLMo-2 8 layers x 8 heads, width 512, random init, batch 1, {args.dtype}, {where}, median of {args.repeats}"
    )
    results = {}
    for length in args.lengths:
        for variant in args.variants:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                variant,
                str(length),
                args.device,
                args.dtype,
                str(args.repeats),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr[-4000:])
                sys.exit(f"the {variant} run at {length} tokens failed (exit {proc.returncode}); its stderr is above")
            results[variant, length] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{'tokens':>6} {'variant':>7} {'seconds':>9} {'peak MiB':>9} {'time/plain':>11} {'mem/plain':>10}")
    for length in args.lengths:
        plain = results["plain", length]
        for variant in args.variants:
            r = results[variant, length]
            print(
                f"{length:>6} {variant:>7} {r['seconds']:>9.4f} {r['peak_mib']:>9.1f} "
                f"{_ratio(r['seconds'], plain['seconds']):>10.2f}x {_ratio(r['peak_mib'], plain['peak_mib']):>9.2f}x"
            )
        if "naive" in args.variants and "ours" in args.variants:
            ours, naive = results["ours", length], results["naive", length]
            print(
                f"{length:>6} naive/ours: time {_ratio(naive['seconds'], ours['seconds']):.2f}x, "
                f"memory {_ratio(naive['peak_mib'], ours['peak_mib']):.2f}x"
            )
    if "ours" in args.variants:
        longest = max(args.lengths)
        ratio = _ratio(results["ours", longest]["seconds"], results["plain", longest]["seconds"])
        print(f"ours/plain time at {longest} tokens: {ratio:.2f}x")


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":  # --child VARIANT LENGTH DEVICE DTYPE REPEATS
        variant, length, device, dtype, repeats = sys.argv[2:]
        print(json.dumps(child(variant, int(length), device, dtype, int(repeats))))
    else:
        main()
