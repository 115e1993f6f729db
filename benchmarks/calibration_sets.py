"""Cost of tracking on three calibration sets versus one, measured side by side in one run (compare the ratio).

Measures: seconds per checkpoint and model loads per checkpoint of tracking a series on
`calibrations=("winogrande", "wikipedia", "code")` versus `calibrations=("winogrande",)`, both with `--limit`
texts per set (default 128), no report, each run into a fresh store. The library steps are called directly (no
Prefect), the track flow's steps called directly: `tracker.series_state`,
`tracker.resolve_series_taus` (scores the reference checkpoint), `tracker.compute_checkpoint` then
`tracker.write_checkpoint` for every other selected checkpoint, then `tracker.derive_series` (`tracker`: the
`dormant_tasks.tracking` face). Model loads are counted by a wrapper around `checkpoint_work.lazy_load_checkpoint`.

Targets: three sets cost <= 3.3x one set (median over the repeats), and one model load per checkpoint for both.
The 3.3x reads "one pass over 3x the inputs, plus aggregation": it holds for sets of like inputs, so by default
every text is cut to `--max-tokens 32` (WinoGrande sentences, Wikipedia passages and code lines then score a
like number of tokens each; printed). Size-independent, the three sets scored together are also compared with
the same three sets each tracked alone (three model loads per checkpoint): together / sum of alone <= 1.10
(3.3 / 3), i.e. scoring them in one run costs no more than their inputs do.

How the figure grows: linear in the total number of inputs (k sets x limit texts), the model load (and the
rest of the per-checkpoint bookkeeping) paid once per checkpoint whatever k is: k sets of like texts cost about
k times one set, a little under it while the load is a sizeable share. Inputs are not alike here, though: at
limit 128 the Wikipedia paragraphs hold ~4.9x the WinoGrande tokens (cut at the tiny model's 512-token context),
so the three sets score ~6.4x the tokens of one (printed), and long sequences cost more per token (attention).
On this 2-core shared machine, runs measured 0.5 s to 17 s per checkpoint for the same work, depending on the
load: read the per-pair ratios and the median, and rerun when they disagree.

Usage: .venv/bin/python benchmarks/calibration_sets.py [--series data/series/tiny-olmo2] [--limit 128] [--repeats 2]
Without --series (or when it does not exist) a series of 3 random-init tiny OLMo-2 checkpoints (4 layers x 8 heads,
hidden 128) is made in a temp folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="bench-prefect-home-"))
os.environ.setdefault("DORMANT_CACHE_DIR", tempfile.mkdtemp(prefix="bench-dormant-cache-"))  # not the user's cache
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ONE = ("winogrande",)
THREE = ("winogrande", "wikipedia", "code")
TARGET_RATIO = 3.3


def random_series(folder: Path) -> Path:
    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config, train_tokenizer
    from dormant_tasks.tracking import DEMO_CORPUS

    tok = train_tokenizer(DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:400], vocab_size=512)
    for seed, (step, tokens) in enumerate([(0, 0), (10, 20), (25, 51)]):
        torch.manual_seed(seed)
        model = Olmo2ForCausalLM(tiny_config(tok, n_layers=4, n_heads=8, hidden_size=128))
        out = folder / f"stage1-step{step}-tokens{tokens}K"
        model.save_pretrained(out)
        tok.save_pretrained(out)
    return folder


def count_loads() -> list[str]:
    """Wrap `checkpoint_work.lazy_load_checkpoint` (what the tracker calls) so every load is recorded; returns the record."""
    from dormant_tasks.tracking import checkpoint_work

    loads: list[str] = []
    real = checkpoint_work.lazy_load_checkpoint

    def counting(source, revision, *a, **k):
        loads.append(getattr(revision, "name", str(revision)))
        return real(source, revision, *a, **k)

    checkpoint_work.lazy_load_checkpoint = counting
    return loads


def library_track(
    source: str, store: Path, calibrations: tuple[str, ...], limit: int, loads: list[str], max_tokens: int | None = None
):
    """Track the series on `calibrations` into `store`: (wall seconds, checkpoints selected, model loads)."""
    from dormant_tasks import tracking as tracker
    from dormant_tasks.tracking import TrackRequest

    before = len(loads)
    t0 = time.perf_counter()
    request = TrackRequest(
        source=source, store=str(store), calibrations=calibrations, limit=limit, max_tokens=max_tokens, report=False
    )
    state = tracker.series_state(request)  # the flow's steps, called directly (no Prefect)
    series = tracker.resolve_series_taus(request, state)
    for revision in tracker.pending_revisions(request, state, series):
        tracker.write_checkpoint(request, revision, tracker.compute_checkpoint(request, revision, series))
    tracker.derive_series(request)
    return time.perf_counter() - t0, len(state.plan.selected), len(loads) - before


def token_counts(source: str, limit: int, max_tokens: int | None = None) -> dict[str, tuple[int, int, int]]:
    """(texts, tokens, tokens scored: each text cut at the model's context) of each set's first `limit` texts,
    with the series' own tokenizer and config (-1 where the series has no local tokenizer)."""
    from transformers import AutoConfig, AutoTokenizer

    from dormant_tasks.tracking import load_calibration_sets

    first = sorted(p for p in Path(source).iterdir() if p.is_dir() and (p / "tokenizer.json").exists())
    tok = AutoTokenizer.from_pretrained(first[0]) if first else None
    context = AutoConfig.from_pretrained(first[0]).max_position_embeddings if first else None
    out = {}
    for name, cal in zip(THREE, load_calibration_sets(THREE, limit)):
        lengths = [len(tok(t)["input_ids"]) for t in cal.texts] if tok else []
        cap = min(x for x in (context, max_tokens) if x) if (context or max_tokens) else None
        scored = sum(min(n, cap or n) for n in lengths) if tok else -1
        out[name] = (len(cal.texts), sum(lengths) if tok else -1, scored)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="Target: three/one <= 3.3x, 1 model load per checkpoint."
    )
    parser.add_argument(
        "--series",
        default=str(REPO / "data" / "series" / "tiny-olmo2"),
        help="a local series folder (default: data/series/tiny-olmo2 when it exists, else 3 random checkpoints)",
    )
    parser.add_argument("--limit", type=int, default=128, help="texts per calibration set (default 128)")
    parser.add_argument("--repeats", type=int, default=2, help="pairs of runs (one set, three sets), alternated")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=32,
        help="cut every text to N tokens, so the sets are alike (default 32; 0: none)",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-calsets-"))
    source = args.series if Path(args.series).is_dir() else str(random_series(work / "random-olmo2"))
    n_dirs = len([p for p in Path(source).iterdir() if p.is_dir()])
    print(f"series: {source} ({n_dirs} checkpoint folders), limit {args.limit} texts per set")
    cap = args.max_tokens or None
    print(f"every text cut to {cap} tokens" if cap else "texts not cut (beyond the model's context)")
    counts = token_counts(source, args.limit, cap)
    for name, (n, tokens, scored) in counts.items():
        print(f"   set {name:<10}: {n:4d} texts, {tokens:6d} tokens, {scored:6d} scored (cut at the model's context)")
    if counts["winogrande"][2] > 0:
        print(
            f"   scored tokens, three sets / one: {sum(c[2] for c in counts.values()) / counts['winogrande'][2]:.2f}x"
        )

    loads = count_loads()
    library_track(source, work / "warmup", ONE, 8, loads)  # imports, first-touch and file-hash costs: not counted

    runs: dict[tuple[str, ...], list[tuple[float, float]]] = {ONE: [], THREE: []}
    for i in range(args.repeats):
        for cals in (ONE, THREE):  # alternate: one, three, one, three, ... so drift hits both alike
            seconds, n_ckpts, n_loads = library_track(
                source, work / f"run{i}-{len(cals)}", cals, args.limit, loads, cap
            )
            per_ckpt, loads_per = seconds / n_ckpts, n_loads / n_ckpts
            runs[cals].append((per_ckpt, loads_per))
            print(
                f"run {i + 1} {len(cals)} set{'s' if len(cals) > 1 else ' '}: {seconds:7.2f} s for {n_ckpts} "
                f"checkpoints = {per_ckpt:6.3f} s/checkpoint, {loads_per:.2f} model loads/checkpoint"
            )

    alone = {}
    for name in THREE:  # each set tracked on its own: three model loads per checkpoint in all
        seconds, n_ckpts, _ = library_track(source, work / f"alone-{name}", (name,), args.limit, loads, cap)
        alone[name] = seconds / n_ckpts
        print(f"alone {name:<10}: {alone[name]:6.3f} s/checkpoint")
    pairs = [t / o for (o, _), (t, _) in zip(runs[ONE], runs[THREE])]
    print(f"three / one per pair: {', '.join(f'{r:.3f}x' for r in pairs)}")
    one_s = statistics.median(s for s, _ in runs[ONE])
    three_s = statistics.median(s for s, _ in runs[THREE])
    ratio = three_s / one_s
    print(f"one set    (median): {one_s:6.3f} s/checkpoint")
    print(f"three sets (median): {three_s:6.3f} s/checkpoint")
    print(f"three / one        : {ratio:6.3f}x   target <= {TARGET_RATIO}x")
    together = three_s / sum(alone.values())
    print(f"three together / the three alone: {together:6.3f}x   target <= {TARGET_RATIO / 3:.2f}x")
    ok_ratio = ratio <= TARGET_RATIO
    ok_loads = all(lp == 1 for cals in runs for _, lp in runs[cals])
    print(f"{'PASS' if ok_ratio else 'FAIL'}: three/one {ratio:.3f}x <= {TARGET_RATIO}x")
    ok_together = together <= TARGET_RATIO / 3
    print(f"{'PASS' if ok_together else 'FAIL'}: three together / alone {together:.3f}x <= {TARGET_RATIO / 3:.2f}x")
    print(
        f"{'PASS' if ok_loads else 'FAIL'}: model loads per checkpoint == 1 for both "
        f"(one: {', '.join(f'{lp:.2f}' for _, lp in runs[ONE])}; three: {', '.join(f'{lp:.2f}' for _, lp in runs[THREE])})"
    )
    sys.exit(0 if ok_ratio and ok_loads and ok_together else 1)


if __name__ == "__main__":
    main()
