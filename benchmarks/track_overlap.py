"""Does the track flow's local runner download the NEXT checkpoint while it scores the CURRENT one?

A series of N random-init OLMo-2 checkpoints (default: the shape of OLMo-2-0425-1B, ~1.48 B parameters,
bf16 safetensors of ~3 GB each, every one with its own weights so no download is a cache hit) is served
by a real Hub server on loopback (the olah mirror of the integration tests, one branch per checkpoint) and
tracked by the real `track` flow (`flows.track.track`, local runner, HF_ENDPOINT at the mirror).

Measured side by side in one run:
  1. each checkpoint's download on its own (`hub.download_revision` into a scratch cache, one at a time);
  2. the tracked run: per checkpoint the flow's own seconds (download = time spent waiting for / verifying
     the files inside the analysis, load, score, write; the `checkpoints` table's `seconds` is their sum)
     and its wall (from the previous checkpoint's end), plus the wall of the whole flow.

Target: total wall <= 1.15 x (download of the first + sum over checkpoints of max(download, work)),
where download is the stand-alone figure of 1. and work = load + score + write of 2. (what can run while
the next checkpoint downloads). The bound is additive per checkpoint; the cumulative columns show how it grows.

On a machine of few cores the mirror serving a checkpoint, the client verifying it and CPU scoring all
compete for the same cores, so every download runs slower while a checkpoint scores than on its own, and
the bound (made of stand-alone downloads) is missed by contention, not by a missing overlap; the last line
prints the same bound with the run's own download times. `--split-cores` separates the resources as the
network and a GPU are separate on a real machine: the mirror pinned to one core, torch on one thread.

Usage: python benchmarks/track_overlap.py [--cache ~/.cache/dormant-heads-bench/overlap] [--checkpoints 4]
                                          [--limit 16] [--max-tokens 64] [--size 1b|small] [--split-cores]
The series (checkpoint folders + mirror repo) is generated once under --cache and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="bench-prefect-home-"))
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import hub_server  # noqa: E402 - stdlib only; the olah mirror of the integration tests

REPO_ID = "bench-org/olmo2-overlap"
TARGET = 1.15
# OLMo-2-0425-1B's config.json: 16 layers x 16 heads (no GQA), hidden 2048, MLP 8192, untied 100352-row
# embeddings -> 1.485 B parameters. `small` keeps the structure at ~1/8 of the bytes, for a quick run.
SHAPES = {
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16),
    "small": dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=8, num_attention_heads=16),
}
VOCAB = 100352


def branch_names(n: int) -> list[str]:
    return [f"stage1-step{1000 * (i + 1)}-tokens{2 * (i + 1)}B" for i in range(n)]


# ------------------------------------------------------------------------------------------- the series


def make_checkpoints(folder: Path, size: str, n: int) -> dict[str, Path]:
    """One random init, saved N times with one small tensor perturbed per checkpoint: every weight file
    has its own sha256, so neither the mirror nor the HF cache can share a blob between checkpoints."""
    import torch
    from transformers import Olmo2Config, Olmo2ForCausalLM

    from dormant_tasks.tiny import BOUNDARY, train_tokenizer
    from dormant_tasks.tracking import DEMO_CORPUS

    tok = train_tokenizer(DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:400], vocab_size=512)
    boundary = tok.convert_tokens_to_ids(BOUNDARY)
    config = Olmo2Config(
        vocab_size=VOCAB,  # > len(tokenizer), as OLMo-2's own 100352 rows exceed its tokenizer's ids
        num_key_value_heads=SHAPES[size]["num_attention_heads"],
        max_position_embeddings=4096,
        rope_theta=500000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        pad_token_id=boundary,
        bos_token_id=boundary,
        eos_token_id=boundary,
        **SHAPES[size],
    )
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = Olmo2ForCausalLM(config).to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"random init: {n_params / 1e9:.3f} B parameters ({time.perf_counter() - t0:.0f} s)", flush=True)
    folders = {}
    for i, name in enumerate(branch_names(n)):
        with torch.no_grad():
            model.model.norm.weight.fill_(1.0 + 0.01 * i)  # the final norm: a distinct file, the same cost
        folders[name] = folder / name
        model.save_pretrained(folders[name])
        tok.save_pretrained(folders[name])
        print(f"saved {name} ({_weights_bytes(folders[name]) / 1e9:.2f} GB)", flush=True)
    return folders


def _weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def build_linked_mirror(mirrors: Path, repo_id: str, branches: dict[str, Path]) -> dict[str, str]:
    """`hub_server.build_mirror_repo`, but LFS objects are hard links of the checkpoint files (no copy of GBs)."""
    repo = mirrors / "models" / repo_id
    repo.mkdir(parents=True)
    hub_server._git(repo, "init", "-q", "-b", "main")
    commits = {}
    for name, folder in branches.items():
        hub_server._git(repo, "checkout", "-q", "--orphan", name)
        hub_server._git(repo, "rm", "-rfq", "--ignore-unmatch", ".")
        for src in sorted(p for p in folder.iterdir() if p.is_file()):
            if src.suffix in hub_server.LFS_SUFFIXES:
                from dormant_tasks.checkpoints import file_sha256

                oid = file_sha256(src)
                obj = repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
                obj.parent.mkdir(parents=True, exist_ok=True)
                if not obj.exists():
                    os.link(src, obj)
                size = src.stat().st_size
                (repo / src.name).write_text(
                    f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
                )
            else:
                (repo / src.name).write_bytes(src.read_bytes())
        (repo / hub_server.CHAT_TEMPLATE_DIR).mkdir(exist_ok=True)
        (repo / hub_server.CHAT_TEMPLATE_DIR / "README.md").write_text("No additional chat templates.\n")
        hub_server._git(repo, "add", "-A")
        hub_server._git(repo, "commit", "-qm", f"checkpoint {name}")
        commits[name] = hub_server._git(repo, "rev-parse", "HEAD")
    return commits


def ensure_series(cache: Path, size: str, n: int) -> tuple[Path, dict[str, str]]:
    """(mirrors folder, {branch: commit}); generated on first use, reused when its manifest is there."""
    root = cache / f"{size}-{n}"
    manifest = root / "series.json"
    if manifest.exists():
        commits = json.loads(manifest.read_text())["commits"]
        print(f"series: reusing {root} ({n} checkpoints, {size})")
        return root / "mirrors", commits
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    folders = make_checkpoints(root / "checkpoints", size, n)
    commits = build_linked_mirror(root / "mirrors", REPO_ID, folders)
    manifest.write_text(json.dumps({"repo": REPO_ID, "size": size, "commits": commits}, indent=1))
    print(f"series: generated {root} in {time.perf_counter() - t0:.0f} s")
    return root / "mirrors", commits


def find_olah_venv(explicit: str | None) -> Path:
    """--olah-venv, else this checkout's `.venv-olah`, else the main worktree's (a git worktree shares it)."""
    candidates = [Path(explicit)] if explicit else [REPO / ".venv-olah"]
    if not explicit:
        common = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if common:
            candidates.append(Path(common).parent / ".venv-olah")
    for c in candidates:
        if (c / "bin" / "olah-cli").exists():
            return c
    return candidates[0]  # hub_server.olah_cli() creates it there


# ------------------------------------------------------------------------------------------- measuring


class Timeline:
    """Intervals of every `download_revision` and `score_checkpoint` call in this process (any thread)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.downloads: list[dict] = []
        self.scored: list[dict] = []

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def install(self) -> None:
        from dormant_tasks.checkpoints import loading
        from dormant_tasks.tracking import tracker

        real_download, real_score = loading.download_revision, tracker.score_checkpoint

        def download_revision(repo, name, *args, **kwargs):
            start = self.now()
            try:
                return real_download(repo, name, *args, **kwargs)
            finally:
                self.downloads.append(
                    dict(name=name, thread=threading.current_thread().name, start=start, end=self.now())
                )

        def score_checkpoint(request, revision, *args, **kwargs):
            start = self.now()
            scored = real_score(request, revision, *args, **kwargs)  # one ScoredCheckpoint per calibration set
            seconds = dict(scored[0].seconds)  # download and load are on the first set's, once
            seconds["score"] = sum(s.seconds["score"] for s in scored)
            self.scored.append(dict(name=revision.name, start=start, end=self.now(), seconds=seconds))
            return scored

        loading.download_revision, tracker.score_checkpoint = download_revision, score_checkpoint


def standalone_downloads(commits: dict[str, str], scratch: Path) -> dict[str, float]:
    """Each checkpoint downloaded (and hash-checked) alone into an empty cache, as the flow does it."""
    from dormant_tasks.checkpoints import download_revision

    out = {}
    for name, commit in commits.items():
        shutil.rmtree(scratch, ignore_errors=True)
        t0 = time.perf_counter()
        path = download_revision(REPO_ID, name, commit, scratch)
        out[name] = time.perf_counter() - t0
        print(f"  alone: {name} {_weights_bytes(path) / 1e9:.2f} GB in {out[name]:6.1f} s", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return out


def tracked_run(work: Path, limit: int, max_tokens: int, timeline: Timeline) -> tuple[float, float, dict]:
    from dormant_tasks.tracking import TrackRequest
    from flows.track import track

    request = TrackRequest(
        source=REPO_ID,
        store=str(work / "store"),
        cache_dir=str(work / "hf-cache"),
        limit=limit,
        max_tokens=max_tokens,
        device="cpu",
        report=False,
    )
    start = timeline.now()
    summary = track(request)
    return start, timeline.now(), summary


def report(alone: dict[str, float], timeline: Timeline, start: float, end: float, store: Path) -> bool:
    from dormant_tasks.store import read_table

    rows = {r["revision"]: r for r in read_table(str(store), "checkpoints").to_pylist()}
    order = sorted(timeline.scored, key=lambda s: s["end"])
    print(
        f"\n{'checkpoint':<26} {'alone dl':>8} {'flow dl':>8} {'load':>6} {'score':>6} {'write':>6} {'work':>6} "
        f"{'wall':>6} {'max(dl,work)':>12} {'cum bound':>9} {'x1.15':>8} {'cum wall':>8}"
    )
    target, prev_end = alone[order[0]["name"]], start
    for s in order:
        name, sec = s["name"], s["seconds"]
        total = rows[name]["seconds"] if name in rows else sum(sec.values())
        write = max(total - sum(sec.values()), 0.0)
        work = sec["load"] + sec["score"] + write
        target += max(alone[name], work)
        print(
            f"{name:<26} {alone[name]:8.1f} {sec['download']:8.1f} {sec['load']:6.1f} {sec['score']:6.1f} "
            f"{write:6.1f} {work:6.1f} {s['end'] - prev_end:6.1f} {max(alone[name], work):12.1f} "
            f"{target:9.1f} {TARGET * target:8.1f} {s['end'] - start:8.1f}"
        )
        prev_end = s["end"]
    print("\ndownloads during the tracked run (s from the flow's start; thread):")
    for d in sorted(timeline.downloads, key=lambda d: d["start"]):
        print(f"  {d['name']:<26} {d['start'] - start:7.1f} -> {d['end'] - start:7.1f}  {d['thread']}")
    wall = end - start
    ok = wall <= TARGET * target
    print(
        f"\ntotal wall {wall:.1f} s; bound = first download {alone[order[0]['name']]:.1f} s + sum max(download, work) "
        f"= {target:.1f} s; wall / bound = {wall / target:.3f} (target <= {TARGET}): {'PASS' if ok else 'FAIL'}"
    )
    # The machine may be busier (or quieter) during the tracked run than during the downloads alone: the same
    # bound with the run's own download times (the longest call per checkpoint: the one that fetched the bytes).
    in_run = {
        d["name"]: max(x["end"] - x["start"] for x in timeline.downloads if x["name"] == d["name"])
        for d in timeline.downloads
    }
    own = in_run[order[0]["name"]] + sum(
        max(in_run[s["name"]], s["seconds"]["load"] + s["seconds"]["score"]) for s in order
    )
    print(f"same bound with the run's own download times: {own:.1f} s; wall / bound = {wall / own:.3f}")
    serial = sum(alone.values()) + sum(s["seconds"]["load"] + s["seconds"]["score"] for s in order)
    print(f"(no overlap at all would be about {serial:.1f} s: every download + load + score one after the other)")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default="~/.cache/dormant-heads-bench/overlap", help="where the series is kept")
    parser.add_argument("--checkpoints", type=int, default=4, help="checkpoints in the series (default 4)")
    parser.add_argument("--limit", type=int, default=16, help="calibration inputs per checkpoint (default 16)")
    parser.add_argument("--max-tokens", type=int, default=64, help="truncate inputs to this many tokens (default 64)")
    parser.add_argument("--size", choices=sorted(SHAPES), default="1b", help="1b: OLMo-2-0425-1B's shape (default)")
    parser.add_argument("--olah-venv", default=None, help="venv holding olah-cli (default: .venv-olah of the checkout)")
    parser.add_argument("--work", default=None, help="scratch folder for caches and the store (default: a temp dir)")
    parser.add_argument(
        "--split-cores",
        action="store_true",
        help="give the mirror its own core and torch one thread, so that serving and scoring do not compete for "
        "the same cores (as the network and the GPU do not on a real machine); needs >= 2 CPUs",
    )
    args = parser.parse_args()
    if args.checkpoints < 2:
        parser.error("--checkpoints must be >= 2: there is nothing to overlap with one")

    # huggingface_hub reads these when first imported: set them before anything imports it.
    port = hub_server.free_port()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-overlap-"))
    os.environ.update(
        HF_ENDPOINT=f"http://127.0.0.1:{port}",
        HF_HOME=str(work / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        TOKENIZERS_PARALLELISM="false",
    )
    hub_server.OLAH_VENV = find_olah_venv(args.olah_venv)
    mirrors, commits = ensure_series(Path(args.cache).expanduser(), args.size, args.checkpoints)
    print(f"mirror: olah from {hub_server.OLAH_VENV} on {os.environ['HF_ENDPOINT']}; work dir {work}")
    import torch

    if args.split_cores:
        if len(os.sched_getaffinity(0)) < 2:
            parser.error("--split-cores needs at least 2 CPUs")
        torch.set_num_threads(1)
    print(
        f"calibration: {args.limit} inputs, max {args.max_tokens} tokens; torch threads {torch.get_num_threads()}, "
        f"CPUs {os.cpu_count()}"
    )

    from prefect.testing.utilities import prefect_test_harness

    with (
        hub_server.OlahServer(mirrors, work / "olah", port=port) as server,
        prefect_test_harness(server_startup_timeout=180),
    ):
        if args.split_cores:  # the mirror on the last core; this process (torch: 1 thread) may use any
            cores = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(server.process.pid, {cores[-1]})
            print(f"split cores: mirror (pid {server.process.pid}) on CPU {cores[-1]}, torch 1 thread")
        print("downloads on their own:")
        alone = standalone_downloads(commits, work / "scratch-cache")
        timeline = Timeline()
        timeline.install()
        print("tracked run (flows.track.track, local runner):", flush=True)
        start, end, summary = tracked_run(work, args.limit, args.max_tokens, timeline)
        print(f"  flow: {summary.analysed} analysed, {summary.n_checkpoints} in the series")
        ok = report(alone, timeline, start, end, work / "store")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
