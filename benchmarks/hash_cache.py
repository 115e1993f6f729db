"""The persistent file hash cache on a local series, measured side by side in one run.

Target: a warm rerun's `local_content_hash` over 1,000 local checkpoint folders takes < 1 s (measured on
--folders folders and extrapolated linearly to --target-folders, which the output says).

The series is synthetic, as users build one: one random "init" checkpoint (config, tokenizer files, a shard
index and --shards safetensors shards totalling --size-mb) hard-linked into --folders checkpoint folders. Its
mtimes are set an hour back, as for any checkpoint not written in the last seconds (a file modified within
`hash_cache.RACY_S` is hashed but not cached). Each pass is a fresh process (no in-process lru carried over)
that times only its loop of `local_content_hash` over every folder, not its imports:

1. uncached: no usable cache (the behaviour before it): every folder's files are read again (skip it with
   --skip-uncached; the files sit in the page cache, so this is a lower bound on a real disk);
2. cold: an empty cache: the linked files are read once, then found by inode;
3. warm: a second process on the cache the cold pass filled: nothing is read.

Usage: .venv/bin/python benchmarks/hash_cache.py [--folders 50] [--size-mb 200] [--shards 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SMALL_FILES = {
    "config.json": b'{"model_type": "olmo2", "hidden_size": 4096}',
    "generation_config.json": b'{"eos_token_id": 100257}',
    "tokenizer.json": b'{"version": "1.0"}' + b" " * 4096,
    "tokenizer_config.json": b'{"model_max_length": 4096}',
    "special_tokens_map.json": b'{"eos_token": "<|endoftext|>"}',
}

PASS = """
import json, sys, time
from pathlib import Path
from dormant_tasks.checkpoints.loading import local_content_hash
folders = [Path(p) for p in json.loads(sys.argv[1])]
t0 = time.perf_counter()
hashes = [local_content_hash(f) for f in folders]
print(json.dumps({"seconds": time.perf_counter() - t0, "hashes": sorted(set(hashes))}))
"""


def build_series(root: Path, folders: int, size_mb: int, shards: int) -> list[Path]:
    init = root / "init"
    init.mkdir(parents=True)
    for name, data in SMALL_FILES.items():
        (init / name).write_bytes(data)
    per_shard = (size_mb << 20) // shards
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    for name in names:
        with open(init / name, "wb") as f:
            for _ in range(per_shard >> 20):
                f.write(os.urandom(1 << 20))
            f.write(os.urandom(per_shard & ((1 << 20) - 1)))
    (init / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": names[0]}}))
    hour_ago = time.time() - 3600
    for p in init.iterdir():
        os.utime(p, (hour_ago, hour_ago))
    series = root / "series"
    out = []
    for step in range(folders):
        folder = series / f"stage1-step{step * 1000}-tokens{step * 4}B"
        folder.mkdir(parents=True)
        for p in init.iterdir():
            os.link(p, folder / p.name)
        out.append(folder)
    return out


def one_pass(folders: list[Path], cache_dir: Path) -> dict:
    env = {**os.environ, "DORMANT_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", PASS, json.dumps([str(f) for f in folders])],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"a pass failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folders", type=int, default=50, help="hard-linked checkpoint folders (default 50)")
    parser.add_argument("--size-mb", type=int, default=200, help="weights per checkpoint in MiB (default 200)")
    parser.add_argument("--shards", type=int, default=3, help="safetensors shards per checkpoint (default 3)")
    parser.add_argument("--target-folders", type=int, default=1000, help="folders to extrapolate to (default 1000)")
    parser.add_argument("--target-s", type=float, default=1.0, help="warm target at --target-folders (default 1 s)")
    parser.add_argument("--skip-uncached", action="store_true", help="skip the pass without a cache")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build the series (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.folders < 1 or args.size_mb < 1 or args.shards < 1:
        parser.error("--folders, --size-mb and --shards must be at least 1")

    root = Path(tempfile.mkdtemp(prefix="bench-hash-cache-", dir=args.workdir))
    try:
        t0 = time.perf_counter()
        folders = build_series(root, args.folders, args.size_mb, args.shards)
        files = len(list(folders[0].iterdir()))
        print(
            f"series: {args.folders} folders x {files} files ({args.size_mb} MiB of weights in {args.shards} "
            f"shards), all hard links of one init; built in {time.perf_counter() - t0:.1f} s under {root}"
        )
        results = {}
        if not args.skip_uncached:
            (root / "a-file").write_bytes(b"")
            results["uncached"] = one_pass(folders, root / "a-file" / "cache")  # its mkdir fails: no cache
        results["cold"] = one_pass(folders, root / "cache")
        results["warm"] = one_pass(folders, root / "cache")
        if len({tuple(r["hashes"]) for r in results.values()}) != 1 or len(results["warm"]["hashes"]) != 1:
            raise SystemExit(f"the passes disagree on the content hash: {results}")

        print(f"\n{'pass':<10}{'seconds':>10}{'per folder':>14}{f'x{args.target_folders} (extrapolated)':>28}")
        for name, r in results.items():
            per = r["seconds"] / args.folders
            print(f"{name:<10}{r['seconds']:>10.3f}{per * 1e3:>11.2f} ms{per * args.target_folders:>26.2f} s")
        cold, warm = results["cold"]["seconds"], results["warm"]["seconds"]
        print(f"\ncold / warm: {cold / warm:.0f}x", end="")
        if "uncached" in results:
            print(f"; uncached / warm: {results['uncached']['seconds'] / warm:.0f}x", end="")
        print(f"  (every pass gives the same commit, {results['warm']['hashes'][0][:12]})")
        projected = warm / args.folders * args.target_folders
        verdict = "met" if projected < args.target_s else "NOT met"
        how = "measured" if args.folders == args.target_folders else f"linear extrapolation from {args.folders} folders"
        print(
            f"target: warm rerun over {args.target_folders} folders < {args.target_s:g} s: {projected:.3f} s "
            f"({how}) -> {verdict}"
        )
        return 0 if projected < args.target_s else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
