"""The integrity audit's cost on a Hub series of many branches, through the real huggingface_hub client.

A loopback Hub mirror (olah, as the integration tests run it: `tests/integration/hub_server.py`) serves one repo of
--branches step branches plus `main`, each holding a config, a tokenizer file, a shard index and --shards
safetensors shards (LFS, small random bytes: only the listing is read). A fresh process times
`checkpoints.audit_series` on the first N branches for each N of --sizes (one tree listing per branch,
`hub.LISTING_WORKERS` at a time, one config read per distinct config and one shard-index read per distinct index:
one for the whole series, as a series' branches usually share it, or one per branch with --distinct-indexes, the
worst case), and prints seconds, seconds per
branch and the growth from the smallest size to the largest (linear: the listings are independent).

Usage: .venv/bin/python benchmarks/audit_listing.py [--branches 1000] [--sizes 100,1000] [--shards 3]
    [--distinct-indexes]
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import hub_server  # noqa: E402 - stdlib only; the olah mirror of the integration tests

CLIENT = """
import json, sys, time
from dormant_tasks.checkpoints.audit import audit_series
start = time.monotonic()
audit = audit_series(sys.argv[1])
print(json.dumps({"seconds": time.monotonic() - start, "branches": len(audit.branches),
                  "flagged": sum(b.verdict not in ("ok", "main") for b in audit.branches)}))
"""


def branch_files(step: int, shards: int, distinct_index: bool = False) -> dict[str, bytes]:
    config = json.dumps({"model_type": "olmo2", "num_hidden_layers": 2, "num_attention_heads": 4}).encode()
    files = {"config.json": config, "tokenizer.json": b'{"version": "1.0"}'}
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for name in names:
        files[name] = os.urandom(256) + f"{step}/{name}".encode()  # unique per branch and shard
    metadata = {"step": step} if distinct_index else {}  # another blob per branch: one index read each
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": metadata, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}
    ).encode()
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=1000)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--distinct-indexes", action="store_true", help="a shard index of its own per branch")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        root = Path(tmp)
        results = {}
        start = time.monotonic()
        for n in sizes:
            steps = {
                f"step{10 * i}-tokens{10 * i}K": branch_files(i, args.shards, args.distinct_indexes) for i in range(n)
            }
            steps["main"] = branch_files(
                n - 1, args.shards, args.distinct_indexes
            )  # the final model, as the Hub serves it
            hub_server.build_repo_fast(root / "mirrors", f"bench/audit-{n}", steps)
        built = time.monotonic() - start
        with hub_server.OlahServer(root / "mirrors", root / "olah") as server:
            env = hub_server.client_env(server.endpoint, root / "hf") | {"PYTHONPATH": str(REPO)}
            for n in sizes:
                out = subprocess.run(
                    [sys.executable, "-c", CLIENT, f"bench/audit-{n}"], env=env, capture_output=True, text=True
                )
                if out.returncode != 0:
                    raise SystemExit(out.stderr[-2000:])
                results[n] = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"mirror built in {built:.1f} s (git fast-import); audit over a loopback olah mirror, {args.shards} shards, "
        f"{'one index per branch' if args.distinct_indexes else 'one index shared by the branches'}:"
    )
    for n, r in results.items():
        print(
            f"  {n:>5} branches + main: {r['seconds']:.1f} s ({1000 * r['seconds'] / (n + 1):.1f} ms per branch), "
            f"{r['flagged']} flagged"
        )
    lo, hi = min(sizes), max(sizes)
    if lo != hi:
        print(
            f"  growth {lo} -> {hi} branches: x{results[hi]['seconds'] / results[lo]['seconds']:.1f} (x{hi / lo:g} branches)"
        )


if __name__ == "__main__":
    main()
