"""Cost of one threshold sweep (docs/SCORES.md §6) next to the plain forward passes it needs at the least.

One sweep = 1 un-intervened pass + 7 thresholds x 3 functions (ahon_ln, lthon_ln, awft) = 22 passes
over the WinoGrande dev set, each giving logits, per-input scores and the zeroed mask. The baseline is
22 plain `model(input_ids, attention_mask)` calls (default attention, sdpa) over the same batches.
Target: sweep / plain <= 1.2.

The model is the demo one: the last checkpoint of `data/series/tiny-olmo2/` when it exists, else a
random-init OLMo-2 of the same shape (4 layers x 8 heads, width 128), which the output says.

    .venv/bin/python benchmarks/sweep_cost.py [--limit N] [--batch-size 16] [--threads 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from dormant_tasks.calibration import DEMO_CORPUS, load_winogrande_items
from dormant_tasks.checkpoints import list_revisions
from dormant_tasks.evaluation import DEFAULT_QUANTILES, encode_requests, run_sweep
from dormant_tasks.loading import load_model_and_tokenizer
from dormant_tasks.winogrande import winogrande_requests

SERIES = Path(__file__).resolve().parent.parent / "data" / "series" / "tiny-olmo2"
FUNCTIONS = ("ahon_ln", "lthon_ln", "awft")


def demo_model(device: str):
    """(model, tokenizer, description): the series' last checkpoint, or a random-init model of its shape."""
    checkpoints = [r.path for r in list_revisions(SERIES).revisions] if SERIES.is_dir() else []
    if checkpoints:
        model, tok = load_model_and_tokenizer(checkpoints[-1], device=device)
        return model, tok, f"trained checkpoint {checkpoints[-1]}"
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config, train_tokenizer

    tok = train_tokenizer(DEMO_CORPUS.read_text(encoding="utf-8").splitlines())
    torch.manual_seed(0)
    model = Olmo2ForCausalLM(tiny_config(tok)).to(device).eval()
    return model, tok, f"random-init OLMo-2 4x8 width 128 (no checkpoint in {SERIES})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="items (default: the whole dev set)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model, tok, described = demo_model(args.device)
    n_passes = 1 + len(FUNCTIONS) * len(DEFAULT_QUANTILES)
    requests = winogrande_requests(load_winogrande_items(), limit=args.limit)
    batches = encode_requests(tok, requests, args.batch_size, args.device).batches
    print(
        f"model: {described}; {len(requests)} items, {len(batches)} batches of <= {args.batch_size} "
        f"sequences, {n_passes} passes, device {args.device}, {torch.get_num_threads()} threads"
    )

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    with torch.no_grad():  # warm-up: first calls allocate and pick kernels
        model(batches[0].input_ids, attention_mask=batches[0].attention_mask)
    run_sweep(
        model,
        tok,
        FUNCTIONS[:1],
        quantiles=(0.1,),
        limit=min(len(requests), 8),
        batch_size=args.batch_size,
        progress=False,
    )

    sync()
    start = time.perf_counter()
    sweep = run_sweep(model, tok, FUNCTIONS, limit=args.limit, batch_size=args.batch_size, progress=False)
    sync()
    sweep_s = time.perf_counter() - start

    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(n_passes):
            for b in batches:
                model(b.input_ids, attention_mask=b.attention_mask)
    sync()
    plain_s = time.perf_counter() - start

    print(f"base accuracy {sweep.base_accuracy:.2f}%")
    for fn, s in sweep.summaries.items():
        curve = ", ".join(f"({x:.1f}%, {y:.1f})" for x, y in s.points)
        print(f"  {fn:9s} within 1 pt {s.within_1pt:6.2f}%  AUC {s.auc:6.2f}  curve {curve}")
    print(f"{'sweep (22 scoring passes)':32s} {sweep_s:8.2f} s")
    print(f"{'22 plain forward passes':32s} {plain_s:8.2f} s")
    print(f"{'ratio sweep / plain':32s} {sweep_s / plain_s:8.2f} x   (target <= 1.2)")


if __name__ == "__main__":
    main()
