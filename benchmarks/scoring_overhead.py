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

Real shapes (`--table`): one table over real model shapes, RANDOMLY initialised (no downloads): OLMo-2 1B
(16 layers x 16 heads, width 2,048), OLMo-2 7B (32 x 32, width 4,096) and Llama-3.2-3B (28 layers x 24 heads,
8 KV heads: GQA); float32 and bfloat16; two input sets: `calibration` (128 inputs of 18-48 tokens, batched as
`score_texts` batches on the device by default: 8 at a time on CPU, by tokens on CUDA) and `long` (4 inputs of
2,048 tokens, one batch). Variants: `plain` (the model's forward with sdpa), `all16` (scoring_pass with all 16
functions) and `sweep3` (the intervention sweep's ahon_ln, lthon_ln, awft). Columns: seconds (median of REPEATS
after a warm-up), real tokens/s, peak memory as above (per case, inside one process per model and dtype), and
the ratios to plain; `path` says which attention the engine ran (triton: the Triton kernel; torch: torch's
kernels). On CPU the shapes are reduced (2 layers, a quarter of the heads, vocabulary 8,192, 16 calibration
inputs, 1 x 256 long tokens) so the table stays a check that runs in minutes; `--full` keeps the real ones.
`--budget-s` stops starting new (model, dtype) cases after that many seconds (the table shows what ran).
Lines `ratio MODEL DTYPE INPUTS VARIANT: R.RRx` follow the table (benchmarks/gpu_check.sh reads them).

Run: .venv/bin/python benchmarks/scoring_overhead.py   (other jobs on the machine add noise: run it twice)
     .venv/bin/python benchmarks/scoring_overhead.py --device cuda --dtype bfloat16
     .venv/bin/python benchmarks/scoring_overhead.py --table [--device cuda] [--models olmo2-7b] [--repeats 3]
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

    from dormant_tasks.engine import scoring_pass

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


# Real shapes (--table): (layers, heads, KV heads, width, MLP width, vocabulary); head dim 128 in all three.
SHAPES = {
    "olmo2-1b": ("olmo2", 16, 16, 16, 2048, 8192, 100_352),
    "llama3.2-3b": ("llama", 28, 24, 8, 3072, 8192, 128_256),
    "olmo2-7b": ("olmo2", 32, 32, 32, 4096, 11_008, 100_352),
}
TABLE_VARIANTS = ("plain", "all16", "sweep3")
SWEEP_FNS = ("ahon_ln", "lthon_ln", "awft")  # benchmarks/sweep_cost.py's FUNCTIONS


def build_shape(name: str, device: str, dtype: str, full: bool):
    """A randomly initialised model of a real shape (reduced unless `full`), built directly in `dtype` on `device`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Olmo2Config, Olmo2ForCausalLM

    family, layers, heads, kv, width, mlp, vocab = SHAPES[name]
    if not full:  # a quarter of the heads (head dim kept), 2 layers, a small vocabulary
        layers, heads, kv, width, mlp, vocab = 2, heads // 4, max(1, kv // 4), width // 4, mlp // 4, 8192
    kwargs = dict(
        vocab_size=vocab,
        hidden_size=width,
        intermediate_size=mlp,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    )
    config = Olmo2Config(**kwargs) if family == "olmo2" else LlamaConfig(head_dim=width // heads, **kwargs)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))  # no float32 copy of a 7B model first
    try:
        with torch.device(device):
            model = (Olmo2ForCausalLM if family == "olmo2" else LlamaForCausalLM)(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def table_inputs(device: str, full: bool, vocab: int):
    """{input set: [(input_ids [batch, seq], attention_mask [batch, seq])]}: right-padded batches on `device`."""
    import torch

    from dormant_tasks.engine import batch_runs, device_batching, padded_batch

    gen = torch.Generator().manual_seed(1)
    n_short, long_shape = (128, (4, 2048)) if full else (16, (1, 256))
    lengths = torch.randint(18, 49, (n_short,), generator=gen).tolist()
    rows = [torch.randint(1, vocab, (n,), generator=gen).tolist() for n in lengths]
    rows_per_batch, tokens = device_batching(device, None, None)
    short = [padded_batch(rows[r.start : r.stop], 0) for r in batch_runs(lengths, rows_per_batch, tokens)]
    long_ids = torch.randint(1, vocab, long_shape, generator=gen)  # [batch, seq]
    sets = {"calibration": short, "long": [(long_ids, torch.ones_like(long_ids))]}
    return {k: [(ids.to(device), mask.to(device)) for ids, mask in v] for k, v in sets.items()}


def table_child(name: str, device: str, dtype: str, repeats: int, full: bool, cases=None) -> list[dict]:
    """The (input set, variant) `cases` (default: all) of one model and dtype, in this process: a dict each."""
    import torch

    from dormant_tasks.engine import scoring_pass, triton_attention

    cuda = device.startswith("cuda")
    model = build_shape(name, device, dtype, full)
    sets = table_inputs(device, full, model.config.vocab_size)
    kernel_calls = []
    real_kernel = triton_attention.attention_with_stats

    def counted(*args, **kwargs):
        kernel_calls.append(1)
        return real_kernel(*args, **kwargs)

    triton_attention.attention_with_stats = counted  # which path the engine takes on this device

    def passes(variant, batches):
        for ids, mask in batches:
            if variant == "plain":
                model(input_ids=ids, attention_mask=mask, use_cache=False)
            else:
                scoring_pass(model, ids, mask, None if variant == "all16" else SWEEP_FNS)

    out = []
    for input_set, batches in sets.items():
        n_tokens = sum(int(mask.sum()) for _, mask in batches)
        for variant in TABLE_VARIANTS:
            if cases is not None and [input_set, variant] not in cases:
                continue
            kernel_calls.clear()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated() / 1024
            else:  # one case per process on CPU: freed memory stays with the process and would hide the next peak
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset the peak-RSS counter (VmHWM) to the current RSS
                base = _status_kib("VmRSS")
            with torch.no_grad():
                passes(variant, batches)  # warm-up (and Triton's compilation)
                times = []
                for _ in range(repeats):
                    if cuda:
                        torch.cuda.synchronize()
                    start = time.perf_counter()
                    passes(variant, batches)
                    if cuda:
                        torch.cuda.synchronize()
                    times.append(time.perf_counter() - start)
            peak = torch.cuda.max_memory_allocated() / 1024 if cuda else _status_kib("VmHWM")
            path = "-" if variant == "plain" else ("triton" if kernel_calls else "torch")
            seconds = statistics.median(times)
            out.append(
                dict(
                    model=name,
                    dtype=dtype,
                    inputs=input_set,
                    shape=f"{len(batches)} x {tuple(batches[0][0].shape)}"
                    if input_set == "long"
                    else f"{n_tokens} tokens, {len(batches)} batches",
                    variant=variant,
                    path=path,
                    seconds=seconds,
                    tokens_per_s=n_tokens / seconds,
                    peak_mib=(peak - base) / 1024,
                )
            )
    return out


def run_table(args) -> None:
    """The real-shape table: one subprocess per (model, dtype) on CUDA (its peak counter resets per case), per
    case on CPU; printed as one table at the end."""
    start = time.perf_counter()
    results, skipped = [], []
    every = [[i, v] for i in ("calibration", "long") for v in TABLE_VARIANTS]
    for name in args.models:
        for dtype in args.dtypes:
            if args.budget_s and time.perf_counter() - start > args.budget_s:
                skipped.append(f"{name} {dtype}")
                continue
            for cases in [every] if args.device != "cpu" else [[case] for case in every]:
                job = dict(
                    name=name, device=args.device, dtype=dtype, repeats=args.repeats, full=args.full, cases=cases
                )
                cmd = [sys.executable, __file__, "--table-child", json.dumps(job)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    sys.stderr.write(proc.stderr[-4000:])
                    sys.exit(f"the {name} {dtype} cases failed (exit {proc.returncode}); its stderr is above")
                results += json.loads(proc.stdout.strip().splitlines()[-1])
    plain = {(r["model"], r["dtype"], r["inputs"]): r for r in results if r["variant"] == "plain"}
    head = (
        f"{'model':<12} {'dtype':<9} {'inputs':<12} {'variant':<7} {'path':<6} {'seconds':>8} {'tokens/s':>10} "
        f"{'peak MiB':>9} {'time/plain':>10} {'mem/plain':>9}  shape"
    )
    print(head)
    for r in results:
        p = plain[r["model"], r["dtype"], r["inputs"]]
        print(
            f"{r['model']:<12} {r['dtype']:<9} {r['inputs']:<12} {r['variant']:<7} {r['path']:<6} "
            f"{r['seconds']:>8.3f} {r['tokens_per_s']:>10.0f} {r['peak_mib']:>9.1f} "
            f"{_ratio(r['seconds'], p['seconds']):>9.2f}x {_ratio(r['peak_mib'], p['peak_mib']):>8.2f}x  {r['shape']}"
        )
    for name in skipped:
        print(f"{name}: not run, --budget-s {args.budget_s} spent")
    for r in results:
        if r["variant"] != "plain":
            p = plain[r["model"], r["dtype"], r["inputs"]]
            ratio = _ratio(r["seconds"], p["seconds"])
            print(f"ratio {r['model']} {r['dtype']} {r['inputs']} {r['variant']}: {ratio:.2f}x")


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
    parser.add_argument("--table", action="store_true", help="the real-shape table (see the module docstring)")
    parser.add_argument(
        "--models", default=",".join(SHAPES), help="--table: comma-separated shapes (default: %(default)s)"
    )
    parser.add_argument(
        "--dtypes", default="bfloat16,float32", help="--table: comma-separated dtypes (default: %(default)s)"
    )
    parser.add_argument("--full", action="store_true", help="--table: real shapes on CPU too (slow)")
    parser.add_argument("--budget-s", type=float, default=0, help="--table: start no case after this many seconds")
    args = parser.parse_args(argv)
    args.models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    args.dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    if not args.models or set(args.models) - set(SHAPES):
        parser.error(f"--models must name some of {', '.join(SHAPES)}")
    if not args.dtypes or set(args.dtypes) - set(DTYPES):
        parser.error(f"--dtypes must name some of {', '.join(DTYPES)}")
    args.full = args.full or args.device != "cpu"
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
    if args.table:
        shapes = "real shapes" if args.full else "reduced shapes (2 layers, 1/4 of the heads)"
        print(f"random init, {shapes}, {where}, median of {args.repeats} after a warm-up")
        return run_table(args)
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
    if len(sys.argv) == 3 and sys.argv[1] == "--table-child":  # --table-child JSON (run_table's job)
        print(json.dumps(table_child(**json.loads(sys.argv[2]))))
    elif len(sys.argv) == 7 and sys.argv[1] == "--child":  # --child VARIANT LENGTH DEVICE DTYPE REPEATS
        variant, length, device, dtype, repeats = sys.argv[2:]
        print(json.dumps(child(variant, int(length), device, dtype, int(repeats))))
    else:
        main()
