"""Track targets, measured side by side in one run (this machine is noisy: compare the ratios).

1. Overhead of the Prefect flow over calling the library directly on the same checkpoints (target: < 15%):
   `tracker.series_state` + `tracker.resolve_series_taus` + `tracker.compute_checkpoint` and `tracker.write_checkpoint`
   per checkpoint + `tracker.derive_series` (`tracker`: the `dormant_tasks.tracking` face),
   versus the `track` flow doing the same into a fresh store. The Prefect server is started (and a
   warm-up flow run) before timing, so its one-off start-up is not counted.
2. Rerun on a fully stored series (target: no model loaded, < 10 s): `dormant track` as a user runs it,
   in a subprocess, on the series just stored.

Usage: .venv/bin/python benchmarks/track_overhead.py [--series data/series/tiny-olmo2] [--limit 64]
Without --series (or when it does not exist) a series of 4 random tiny OLMo-2 checkpoints is made in a temp folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="bench-prefect-home-"))
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def random_series(folder: Path) -> Path:
    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config, train_tokenizer
    from dormant_tasks.tracking import DEMO_CORPUS

    tok = train_tokenizer(DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:400], vocab_size=512)
    for seed, (step, tokens) in enumerate([(0, 0), (10, 20), (25, 51), (50, 102)]):
        torch.manual_seed(seed)
        model = Olmo2ForCausalLM(tiny_config(tok))
        out = folder / f"stage1-step{step}-tokens{tokens}K"
        model.save_pretrained(out)
        tok.save_pretrained(out)
    return folder


def library_run(source: str, store: Path, limit: int) -> float:
    from dormant_tasks import tracking as tracker
    from dormant_tasks.tracking import TrackRequest

    t0 = time.perf_counter()
    request = TrackRequest(source=source, store=str(store), limit=limit, report=False)
    # the flow's steps, called directly (the flow is the one orchestrator; this is its baseline without Prefect)
    state = tracker.series_state(request)
    series = tracker.resolve_series_taus(request, state)
    for revision in tracker.pending_revisions(request, state, series):
        tracker.write_checkpoint(request, revision, tracker.compute_checkpoint(request, revision, series))
    tracker.derive_series(request)
    return time.perf_counter() - t0


def flow_run(source: str, store: Path, limit: int) -> float:
    from dormant_tasks.tracking import TrackRequest
    from flows.track import track

    t0 = time.perf_counter()
    track(TrackRequest(source=source, store=str(store), limit=limit, report=False))
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", default=str(REPO / "data" / "series" / "tiny-olmo2"))
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-track-"))
    source = args.series if Path(args.series).is_dir() else str(random_series(work / "random-olmo2"))
    print(
        f"series: {source} ({len([p for p in Path(source).iterdir() if p.is_dir()])} checkpoints), "
        f"calibration: {args.limit} WinoGrande sentences"
    )

    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        flow_run(source, work / "warmup", 2)  # server start-up and first-flow costs are not the flow's overhead
        lib, flo = [], []
        for i in range(args.repeats):  # alternate the order so drift hits both alike
            runs = (
                [("lib", library_run), ("flow", flow_run)] if i % 2 == 0 else [("flow", flow_run), ("lib", library_run)]
            )
            for name, fn in runs:
                seconds = fn(source, work / f"{name}-{i}", args.limit)
                (lib if name == "lib" else flo).append(seconds)
        lib_s, flow_s = min(lib), min(flo)
        print(f"library directly : {lib_s:7.2f} s   (runs: {', '.join(f'{s:.2f}' for s in lib)})")
        print(f"track flow       : {flow_s:7.2f} s   (runs: {', '.join(f'{s:.2f}' for s in flo)})")
        print(f"flow / library   : {flow_s / lib_s:7.3f}x   target < 1.15x")

    store = work / f"flow-{args.repeats - 1}" if args.repeats % 2 == 0 else work / "lib-0"
    cmd = [
        sys.executable,
        "-m",
        "flows.cli",
        "track",
        "--model",
        source,
        "--store",
        str(store),
        "--limit",
        str(args.limit),
        "--no-report",
    ]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    rerun = time.perf_counter() - t0
    loaded = "Loading weights" in out.stderr or "Flow run" in out.stderr
    print(
        f"rerun on a stored series: {rerun:7.2f} s   target < 10 s ({rerun / 10:.2f}x of it); exit {out.returncode}; "
        f"model loaded or flow started: {'yes' if loaded else 'no'}"
    )
    print("   " + (out.stdout.strip().splitlines() or [""])[-1])


if __name__ == "__main__":
    main()
