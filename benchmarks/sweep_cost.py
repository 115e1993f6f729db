"""Cost of a whole sweep over lm-eval tasks (docs/SCORES.md §6) next to the forward passes it needs at the least.

One sweep = per task 1 un-intervened run + 7 thresholds x 3 functions (ahon_ln, lthon_ln, awft) = 22 runs over
its requests, through lm-eval (requests built once per task, answers scored by its filters and metrics) and
the score engine. Side by side, in one process, over the very same forward rows and batches:
  plain  = 22 plain `model(input_ids, attention_mask)` calls per batch (default attention): the target is
           sweep / plain <= 1.25, the whole intervention evaluation (lm-eval layer, scores, zeroing) over bare
           forward passes of the same requests;
  engine = 22 `scoring_pass` calls per batch (scores + zeroing, no lm-eval): sweep / engine is what the
           lm-eval layer alone adds, engine / plain what the score engine adds.
Default tasks: winogrande + mmlu (--limit items per subject, 57 subjects) + piqa, the authors' shots.

The model is the demo one: the last checkpoint of `data/series/tiny-olmo2/` when it exists, else a
random-init OLMo-2 of the same shape (4 layers x 8 heads, width 128), which the output says.

    .venv/bin/python benchmarks/sweep_cost.py [--tasks winogrande,mmlu,piqa] [--limit 20] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from dormant_tasks.checkpoints import list_revisions, load_model_and_tokenizer
from dormant_tasks.engine import scoring_pass
from dormant_tasks.evaluation import DEFAULT_QUANTILES, EvalRequest, prepare, run_sweep
from dormant_tasks.tracking import DEMO_CORPUS

SERIES = Path(__file__).resolve().parent.parent / "data" / "series" / "tiny-olmo2"
FUNCTIONS = ("ahon_ln", "lthon_ln", "awft")
TARGET = 1.25  # sweep / plain


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


def forward_batches(prepared):
    """The batches DormantLM runs for every task's log-likelihood requests (one row per distinct input)."""
    lm = prepared.lm
    out = []
    for spec in prepared.specs:
        reqs = [
            ((c, x), *lm._encode_pair(c, x))
            for leaf in spec.leaves
            for inst in prepared.instances[leaf]
            for c, x in [inst.args]
        ]
        out += [(ids, x.to(lm.device), m.to(lm.device)) for ids, x, m in lm.row_batches(reqs)[1]]
    return out


def _sync(model) -> None:
    if next(model.parameters()).is_cuda:
        torch.cuda.synchronize()


@torch.no_grad()
def time_passes(model, batches, n_passes: int, engine: bool) -> float:
    _sync(model)
    start = time.perf_counter()
    for _ in range(n_passes):
        for ids, input_ids, mask in batches:
            if engine:
                scoring_pass(model, input_ids, mask, FUNCTIONS, input_indices=ids)
            else:
                model(input_ids=input_ids, attention_mask=mask, use_cache=False)
    _sync(model)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="winogrande,mmlu,piqa")
    parser.add_argument("--limit", type=int, default=5, help="items per (leaf) task (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    if args.threads:
        torch.set_num_threads(args.threads)

    model, tok, described = demo_model(args.device)
    t0 = time.perf_counter()
    request = EvalRequest(
        model="demo",
        store="unused",
        tasks=args.tasks,
        score_fns=("ahon_ln",),
        limit=args.limit,
        batch_size=args.batch_size,
    )
    prepared = prepare(model, tok, request)
    build = time.perf_counter() - t0
    n_passes = 1 + len(FUNCTIONS) * len(DEFAULT_QUANTILES)
    batches = forward_batches(prepared)
    n_rows = sum(len(b[0]) for b in batches)
    print(f"model: {described}")
    print(
        f"tasks {args.tasks}: {sum(prepared.n_items.values())} items, {n_rows} forward rows in {len(batches)} batches"
    )
    print(f"lm-eval task loading + requests built once: {build:.1f} s (not in the ratios)")
    time_passes(model, batches[:2], 1, True)  # warm-up
    plain = time_passes(model, batches, n_passes, engine=False)
    engine = time_passes(model, batches, n_passes, engine=True)
    t0 = time.perf_counter()
    run_sweep(prepared, FUNCTIONS, progress=False)
    sweep = time.perf_counter() - t0
    print(f"{n_passes} passes each: plain {plain:.1f} s, engine {engine:.1f} s, sweep through lm-eval {sweep:.1f} s")
    print(f"sweep / engine = {sweep / engine:.2f}x (what the lm-eval layer adds to the score engine's passes)")
    verdict = "met" if sweep / plain <= TARGET else "MISSED"
    print(
        f"sweep / plain  = {sweep / plain:.2f}x (the whole sweep over plain forward passes; target <= {TARGET}: {verdict})"
    )
    print("all three grow linearly with items x (1 + functions x quantiles); task loading is once per run")


if __name__ == "__main__":
    main()
