"""Cost of the head-role functions (`attn_*`, docs/SCORES.md "Head roles") over a plain pass, measured side by side.

Model: an OLMo-2 config of 8 layers x 8 heads, width 512, vocabulary 10,240 (the probe's ids reach 9,999),
RANDOMLY initialised (timing does not depend on the weights). Inputs: the induction probe's first N sequences of
256 token ids (`tracking.induction_probe`), in batches of 8 as `engine.score_ids` batches them on a CPU.

Variants, each the whole probe batch by batch, under no_grad:
  plain     `model(input_ids)` with the default sdpa attention;
  tracked   `scoring_pass` with `track`'s default set (TRACKED_IDS), what a track run without roles computes;
  roles     `scoring_pass` with the seven role functions alone;
  both      `scoring_pass` with the default set and the roles in one pass (a track run with `--scores ... roles`).
Time: median wall time of REPEATS runs after one warm-up each, the variants run in turn within each repeat (a
change in the machine's load then hits every variant alike; synchronised on CUDA). `--kernel triton` forces the
Triton kernel (on CPU only in Triton's interpreter, TRITON_INTERPRET=1: a correctness run, not a timing).
The last lines are `ratio VARIANT/plain: R.RRx` and `ratio both/tracked: R.RRx` (benchmarks/gpu_check.sh reads
the last: what asking for the roles adds to a track run's pass).

Run: .venv/bin/python benchmarks/role_cost.py [--n 32] [--repeats 3] [--device cuda] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import statistics
import time


def build(device: str, dtype: str):
    import torch
    from transformers import Olmo2Config, Olmo2ForCausalLM

    torch.manual_seed(0)
    config = Olmo2Config(
        vocab_size=10_240,
        hidden_size=512,
        intermediate_size=1_376,
        num_hidden_layers=8,
        num_attention_heads=8,
        max_position_embeddings=512,
    )
    return Olmo2ForCausalLM(config).eval().to(device=device, dtype=getattr(torch, dtype))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=32, help="probe sequences (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--kernel", default="auto", choices=("auto", "torch", "triton"))
    args = p.parse_args()

    import torch

    from dormant_tasks.engine import ROLE_IDS, TRACKED_IDS
    from dormant_tasks.engine.scoring import scoring_pass
    from dormant_tasks.tracking import induction_probe

    model = build(args.device, args.dtype)
    ids = torch.from_numpy(induction_probe(args.n)).to(args.device)  # [n, 256]
    batches = [ids[i : i + 8] for i in range(0, len(ids), 8)]
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    def run(fns):
        with torch.no_grad():
            for b in batches:
                if fns is None:
                    model(input_ids=b, use_cache=False)
                else:
                    scoring_pass(model, b, score_fns=fns, kernel=args.kernel)

    variants = {"plain": None, "tracked": TRACKED_IDS, "roles": ROLE_IDS, "both": TRACKED_IDS + ROLE_IDS}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for fns in variants.values():
        run(fns)  # warm-up
    for _ in range(args.repeats):  # the variants in turn, so that a change of the machine's load hits them alike
        for name, fns in variants.items():
            sync()
            t0 = time.perf_counter()
            run(fns)
            sync()
            times[name].append(time.perf_counter() - t0)
    seconds = {name: statistics.median(t) for name, t in times.items()}
    tokens = ids.numel()
    print(
        f"{args.n} probe sequences x 256 tokens, OLMo-2 8 x 8 heads width 512, {args.device} {args.dtype}, kernel {args.kernel}"
    )
    print(f"{'variant':<8} {'seconds':>8} {'tokens/s':>10} {'x plain':>8}")
    for name, s in seconds.items():
        print(f"{name:<8} {s:8.3f} {tokens / s:10,.0f} {s / seconds['plain']:7.2f}x")
    for name in ("tracked", "roles", "both"):
        print(f"ratio {name}/plain: {seconds[name] / seconds['plain']:.2f}x")
    print(f"ratio both/tracked: {seconds['both'] / seconds['tracked']:.2f}x")


if __name__ == "__main__":
    main()
