"""Does the tiny pretraining give the same weights under every CPU code path? (issue 30, item 1)

Pretrains the demo's series (the default recipe and corpus) for `--steps` steps in a fresh subprocess per
setting and prints the SHA-256 of each checkpoint's weights and the wall time. A setting varies what
differs between x86-64 machines: the ATen kernels' instruction set (ATEN_CPU_CAPABILITY), MKL's code path
(MKL_ENABLE_INSTRUCTIONS; MKL_CBWR pins it), oneDNN's (ONEDNN_MAX_CPU_ISA) and the thread count.

    python benchmarks/tiny_determinism.py [--steps 25]

"reproducible" is the environment `dormant_tasks.tiny.REPRODUCIBLE_ENV` sets for the demo's pretraining:
with it every row must show the same hashes; the rows without it show what a machine of another kind would
get without it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import hashlib, json, sys
from pathlib import Path
from dormant_tasks.tiny import pretrain_tiny
run = pretrain_tiny(sys.argv[1], steps=int(sys.argv[2]), threads=int(sys.argv[3]), progress=False)
print(json.dumps({c.name: hashlib.sha256((Path(sys.argv[1]) / c.name / "model.safetensors").read_bytes()).hexdigest()[:16]
                  for c in run.checkpoints}))
"""


def run(steps: int, threads: int, env: dict) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory(prefix="tiny-determinism-") as tmp:
        full = {k: v for k, v in os.environ.items() if not k.startswith(("MKL_", "ATEN_", "ONEDNN_", "DNNL_"))}
        full |= {"PYTHONPATH": str(REPO), **env}
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(Path(tmp) / "s"), str(steps), str(threads)],
            capture_output=True,
            text=True,
            env=full,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1]), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from dormant_tasks.tiny import REPRODUCIBLE_ENV

    repro = dict(REPRODUCIBLE_ENV)
    settings = [
        ("native (AVX512 here)", 2, {}),
        ("ATen avx2", 2, {"ATEN_CPU_CAPABILITY": "avx2"}),
        ("ATen default", 2, {"ATEN_CPU_CAPABILITY": "default"}),
        ("MKL avx2", 2, {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}),
        ("native, 1 thread", 1, {}),
        ("reproducible", 2, repro),
        ("reproducible, 1 thread", 1, repro),
        ("reproducible + MKL avx2", 2, repro | {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}),
        ("reproducible + MKL sse4_2", 2, repro | {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}),
        ("reproducible + oneDNN avx2", 2, repro | {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
    ]
    print(f"{'setting':<30} {'threads':>7} {'seconds':>8}  hashes (sha256[:16] per checkpoint)")
    for name, threads, env in settings:
        hashes, seconds = run(args.steps, threads, env)
        print(f"{name:<30} {threads:>7} {seconds:>8.1f}  {' '.join(hashes.values())}", flush=True)


if __name__ == "__main__":
    main()
