"""Store scale: rerun, status, report, append and disk size of a series of N checkpoints x 1,024 heads x 16 functions.

Targets (the store-scale issue), at N = 100, 300 and 1,000 checkpoints of 32 layers x 32 heads, all 16
score functions, the default input-score policy:
  - no-op `dormant track --no-report` rerun (every checkpoint already stored): < 10 s, flat in N
  - `dormant status`: < 3 s, flat in N
  - the confident-state decision an append leaves pending, taken and stored as a track run's report takes it (no
    target: it is the statistics' own cost, `docs/SCORES.md` §5, linear in N, paid once per run, never per read)
  - `dormant report` on the stored decision (the common case: after a track run): < 60 s, at most linear in N
  - appending one checkpoint, score excluded (`write_checkpoint` + `derive_series`): < 5 s, flat in N: the
    confident-state decision over the whole series is left to the first read of the transitions
    (`benchmarks/confident_states.py` times the append and that decision side by side up to 3,000 checkpoints)
  - store size on disk: < 1 GB at 1,000 checkpoints

The series is synthetic and costs one model on disk: one random-init tiny OLMo-2 (`--heads`, `--hidden-size`)
hard-linked into N folders `stage1-step{S}-tokens{T}K`, each with weights of its own (a sparse file: the template's
header naming the folder, zeros for the data) so that the integrity audit sees N distinct checkpoints. Its reference (last) checkpoint is tracked for real
(`tracker.resolve_series_taus` scores it and fixes the quantile taus); every other checkpoint is written with
`tracker.write_checkpoint` from the reference's real per-input scores plus a smooth seeded per-head drift,
so that heads cross tau and the series has transitions. `derive_series` runs once per measured size. The
store grows 100 -> 300 -> 1,000 in place; each size is measured, then one checkpoint is appended (so the
next size holds one more than its N). The CLI commands run in subprocesses (wall time, Python start-up
included), as a user runs them, on whatever code is on the PYTHONPATH.

A local series' rerun needs every checkpoint folder's content hash (`hub.local_content_hash`); the per-file
hashes are cached across processes (`hash_cache`), so a rerun reads no weights. The `uncached content hashing`
row estimates what the rerun would cost without that cache (N x the sha256 time of one folder).

Usage: PYTHONPATH=. .venv/bin/python benchmarks/store_scale.py [--sizes 100,300,1000] [--heads 32x32] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="bench-prefect-home-"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

TARGETS = {  # figure -> (target, unit, wanted growth)
    "rerun": (10.0, "s", "flat"),
    "status": (3.0, "s", "flat"),
    "decision": (float("nan"), "s", "linear"),
    "report": (60.0, "s", "linear"),
    "append": (5.0, "s", "flat"),
    "size": (1024.0, "MB", "linear"),
}
STEP_EVERY = 10  # checkpoint i is stage1-step{10 i}-tokens{40 i}K
TOKENS_PER_STEP_K = 4


def checkpoint_name(i: int) -> str:
    step = STEP_EVERY * i
    return f"stage1-step{step}-tokens{step * TOKENS_PER_STEP_K}K"


# ------------------------------------------------------------------------------------------ the series


def make_template(folder: Path, n_layers: int, n_heads: int, hidden_size: int):
    """One random-init tiny OLMo-2 saved to `folder`; returns (model, tokenizer)."""
    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config, train_tokenizer
    from dormant_tasks.tracking import DEMO_CORPUS

    tok = train_tokenizer(DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:400], vocab_size=512)
    torch.manual_seed(0)
    model = Olmo2ForCausalLM(tiny_config(tok, n_layers=n_layers, n_heads=n_heads, hidden_size=hidden_size))
    model.eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model, tok


def link_checkpoints(template: Path, series: Path, start: int, stop: int, real: int | None = None) -> None:
    """Checkpoint folders start..stop-1: hard links to the template's files, but for its weights, which each folder
    holds as its own file (so that the integrity audit sees N distinct checkpoints, not N - 1 duplicates): the
    template's safetensors header with the folder's name in its metadata, then the weights' bytes as a hole (a
    sparse file: a few KB on disk, zeros when read). Folder `real` (the reference, which is loaded and scored)
    holds the template's weights."""
    files = [p for p in template.iterdir() if p.is_file()]
    for i in range(start, stop):
        out = series / checkpoint_name(i)
        out.mkdir(parents=True)
        for p in files:
            if p.suffix != ".safetensors":
                os.link(p, out / p.name)
            elif i == real:
                shutil.copyfile(p, out / p.name)
            else:
                distinct_weights(p, out / p.name, checkpoint_name(i))


def distinct_weights(template: Path, out: Path, name: str) -> None:
    """A safetensors file of the template's tensors (shapes, dtypes) whose header names `name` and whose data is a
    hole (`link_checkpoints`)."""
    with template.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = template.stat().st_size - 8 - n
    header["__metadata__"] = {**header.get("__metadata__", {}), "bench_checkpoint": name}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with out.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + data)


def folder_hash_seconds(folder: Path) -> float:
    """sha256 of every file of one checkpoint folder (what a rerun pays per local checkpoint, file cache warm)."""
    t0 = time.perf_counter()
    for p in sorted(folder.iterdir()):
        if p.is_file():
            h = hashlib.sha256()
            with p.open("rb") as f:
                for chunk in iter(lambda f=f: f.read(1 << 24), b""):
                    h.update(chunk)
    return time.perf_counter() - t0


def du_bytes(folder: Path) -> int:
    """Disk usage (allocated blocks) of a folder, as `du` counts it."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


class Drift:
    """Synthetic per-input scores of checkpoint i: the reference's real scores plus a smooth per-head offset.

    offset(i) = A (sin(w (i - ref) + phi) - sin(phi)) per (function, layer, head): zero at the reference
    checkpoint (whose real scores are stored as they are), periods of 30 to 1,500 checkpoints, amplitudes
    of `noise` x the spread of the per-head medians across heads, so heads near tau cross it now and then.
    """

    def __init__(self, base: np.ndarray, ref_index: int, noise: float, seed: int = 0):
        self.base, self.ref = base, ref_index
        _, n_fns, n_layers, n_heads = base.shape
        rng = np.random.default_rng(seed)
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                medians = np.nanmedian(base, axis=0)  # [fn, layer, head]
                spread = np.nanstd(medians, axis=(1, 2))  # [fn]
                fallback = np.nanstd(base, axis=(0, 2, 3))
        spread = np.where(np.isfinite(spread) & (spread > 0), spread, np.nan_to_num(fallback))
        shape = (n_fns, n_layers, n_heads)
        self.amplitude = noise * spread[:, None, None] * rng.standard_normal(shape)
        self.omega = 2 * np.pi / np.exp(rng.uniform(np.log(30), np.log(1500), shape))
        self.phase = rng.uniform(0, 2 * np.pi, shape)

    def values(self, i: int) -> np.ndarray:
        offset = self.amplitude * (np.sin(self.omega * (i - self.ref) + self.phase) - np.sin(self.phase))
        return self.base + offset[None]


# ------------------------------------------------------------------------------------------ the store


class Builder:
    """The store of the growing series, written through the library's stable entry points."""

    def __init__(self, series: Path, store: Path, template: Path, limit: int, noise: float, template_model, tokenizer):
        from dormant_tasks.engine import ALL_IDS, score_texts
        from dormant_tasks.tracking import TrackRequest

        self.series, self.store, self.template = series, store, template
        self.request = TrackRequest(
            source=str(series), store=str(store), limit=limit, score_fns=ALL_IDS, report=False
        )  # 16 functions, as the README's figures
        req = self.request
        t0 = time.perf_counter()
        self.base = score_texts(template_model, tokenizer, req.calibration.texts, req.scoring)
        self.seconds_base = time.perf_counter() - t0
        self.n_layers, self.n_heads = self.base.values.shape[2:]
        self.drift: Drift | None = None
        self.taus = None
        self.commits: dict[str, str] = {}  # revision -> its folder's content hash (each folder its own weights)
        self.written: set[str] = set()
        self.noise = noise

    def plan(self):
        from dormant_tasks.tracking import plan_series

        return plan_series(self.request)

    def scored(self, index: int, revision):
        from dormant_tasks.engine import InputScores
        from dormant_tasks.tracking import ScoredCheckpoint

        scores = InputScores(self.base.score_fns, self.drift.values(index), self.base.n_tokens, self.base.n_truncated)
        from dormant_tasks.tracking import known_commit

        commit = self.commits.setdefault(revision.name, known_commit(revision))
        return ScoredCheckpoint(revision, commit, scores, self.n_layers, self.n_heads, "float32", "cpu", {})

    def first(self) -> float:
        """Fix the series' taus: `resolve_series_taus` scores the reference (last) checkpoint and stores it."""
        from dormant_tasks.tracking import known_commit, resolve_series_taus, series_state

        plan = self.plan()
        t0 = time.perf_counter()
        self.taus = resolve_series_taus(self.request, series_state(self.request))
        seconds = time.perf_counter() - t0
        ref = plan.listed[-1]
        self.written.add(ref.name)
        self.commits[ref.name] = known_commit(ref)
        self.drift = Drift(self.base.values, len(plan.listed) - 1, self.noise)
        return seconds

    def write_missing(self, progress_every: int = 50) -> int:
        """Write every listed checkpoint not written yet, in series order (the synthetic scores)."""
        from dormant_tasks.tracking import rows_of, write_checkpoint

        plan = self.plan()
        todo = [(i, r) for i, r in enumerate(plan.listed) if r.name not in self.written]
        t0 = time.perf_counter()
        for k, (i, rev) in enumerate(todo, 1):
            write_checkpoint(self.request, rev, rows_of(self.request, (self.scored(i, rev),), self.taus))
            self.written.add(rev.name)
            if k % progress_every == 0 or k == len(todo):
                el = time.perf_counter() - t0
                print(
                    f"    wrote {k}/{len(todo)} checkpoints ({len(self.written)} stored), "
                    f"{el:.1f} s, {el / k:.3f} s per checkpoint",
                    flush=True,
                )
        return len(todo)

    def derive(self) -> float:
        from dormant_tasks.tracking import derive_series

        t0 = time.perf_counter()
        summary = derive_series(self.request)
        seconds = time.perf_counter() - t0
        print(
            f"    derive_series: {seconds:.2f} s, {summary.n_checkpoints} checkpoints, "
            f"{summary.n_transitions} transitions",
            flush=True,
        )
        return seconds

    def append_one(self) -> float:
        """One more checkpoint at the end of the series: write_checkpoint + derive_series timed, nothing else."""
        from dormant_tasks.tracking import derive_series, rows_of, write_checkpoint

        n = len(self.written)
        link_checkpoints(self.template, self.series, n, n + 1)
        plan = self.plan()
        rev = plan.listed[-1]
        assert rev.name == checkpoint_name(n), rev.name
        scored = self.scored(n, rev)  # building the synthetic scores is not timed (scoring is excluded)
        t0 = time.perf_counter()
        write_checkpoint(self.request, rev, rows_of(self.request, (scored,), self.taus))
        derive_series(self.request)
        seconds = time.perf_counter() - t0
        self.written.add(rev.name)
        return seconds


# ------------------------------------------------------------------------------------------ the CLI


def cli(args: list[str], timeout: float) -> tuple[float, subprocess.CompletedProcess | None]:
    cmd = [sys.executable, "-m", "flows.cli", *args]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf"), None
    return time.perf_counter() - t0, out


def last_line(out: subprocess.CompletedProcess | None) -> str:
    if out is None:
        return "(timed out)"
    lines = (out.stdout.strip() or out.stderr.strip()).splitlines()
    return f"exit {out.returncode}: " + (lines[-1] if lines else "")


def measure(builder: Builder, n: int, work: Path, timeout: float) -> dict[str, float]:
    req = builder.request
    fig: dict[str, float] = {"size": du_bytes(builder.store) / 1e6}
    print(f"    store on disk: {fig['size']:.1f} MB ({fig['size'] / n:.3f} MB per checkpoint)", flush=True)

    limit = [] if req.limit is None else ["--limit", str(req.limit)]  # the same calibration set
    rerun = ["track", "--model", req.source, "--store", req.store, *limit, "--no-report"]
    seconds, out = cli(rerun, timeout)
    fig["rerun"] = seconds
    m = re.search(r"(\d+) checkpoints analysed, (\d+) already stored", out.stdout if out else "")
    loaded = out is not None and ("Loading weights" in out.stderr or "Flow run" in out.stderr)
    noop = out is not None and out.returncode == 0 and m is not None and m[1] == "0" and int(m[2]) == n
    print(
        f"    rerun  {seconds:8.2f} s  {'no-op' if noop else 'NOT A NO-OP'}"
        f"{', model loaded or flow started' if loaded else ''}; {last_line(out)}",
        flush=True,
    )
    if out is not None and not noop:
        print("      " + (out.stdout + out.stderr).strip().replace("\n", "\n      ")[-2000:])

    seconds, out = cli(["status", "--store", req.store], timeout)
    fig["status"] = seconds
    print(f"    status {seconds:8.2f} s  {last_line(out)}", flush=True)

    fig["decision"] = store_decision(req)
    print(
        f"    decide {fig['decision']:8.2f} s  (the confident-state decision over the whole series, taken and stored as "
        "a track run's report takes it once per run; a plain `dormant report` then reads it)",
        flush=True,
    )

    report_dir = work / f"report-{n}"
    seconds, out = cli(
        ["report", "--store", req.store, "--model", req.model_id, "--reports-dir", str(report_dir)], timeout
    )
    fig["report"] = seconds
    print(f"    report {seconds:8.2f} s  {last_line(out)}", flush=True)
    if out is not None and out.returncode != 0:
        print("      " + out.stderr.strip().replace("\n", "\n      ")[-2000:])

    fig["append"] = builder.append_one()
    print(f"    append {fig['append']:8.2f} s  (write_checkpoint + derive_series of checkpoint {n + 1})", flush=True)
    return fig


def store_decision(request) -> float:
    """Take the pending confident-state decision of every calibration set and store it, holding the series as a
    track run's report does (`tracking.decision`): seconds."""
    from dormant_tasks.store import hold_series
    from dormant_tasks.tracking import SeriesView
    from dormant_tasks.tracking.series import open_views

    t0 = time.perf_counter()
    with hold_series(request.store, request.model_id):
        for view in open_views(request.store, request.model_id):
            view.transitions()
    seconds = time.perf_counter() - t0
    assert not SeriesView.open(request.store, request.model_id).decision_pending()
    return seconds


# ------------------------------------------------------------------------------------------ main


def fmt(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    if value == float("inf"):
        return "timeout"
    return f"{value:.1f} {unit}" if unit == "MB" or value >= 100 else f"{value:.2f} {unit}"


def print_table(sizes: list[int], figs: dict[int, dict[str, float]], extra: dict[str, dict[int, float]]) -> None:
    done = [n for n in sizes if n in figs]
    first, last = done[0], done[-1]
    names = {
        "rerun": "no-op track rerun (CLI)",
        "status": "status (CLI)",
        "decision": "decide + store (once per run)",
        "report": "report (CLI, decision stored)",
        "append": "append 1 ckpt (write+derive)",
        "size": "store size on disk",
    }
    head = ["figure", *[f"N={n}" for n in done], "target", f"growth {last}/{first}", "aim"]
    rows = []
    for key, label in names.items():
        target, unit, aim = TARGETS[key]
        vals = [figs[n].get(key) for n in done]
        ratio = vals[-1] / vals[0] if vals[0] and np.isfinite(vals[-1]) and len(done) > 1 else float("nan")
        tgt = "-" if np.isnan(target) else f"< {target:g} {unit}" if unit != "MB" else "< 1 GB at 1000"
        rows.append([label, *[fmt(v, unit) for v in vals], tgt, "-" if np.isnan(ratio) else f"{ratio:.2f}x", aim])
    for label, (unit, per_n) in extra.items():
        vals = [per_n.get(n) for n in done]
        ratio = vals[-1] / vals[0] if vals[0] and len(done) > 1 else float("nan")
        rows.append([label, *[fmt(v, unit) for v in vals], "", "-" if np.isnan(ratio) else f"{ratio:.2f}x", ""])
    widths = [max(len(str(r[c])) for r in [head, *rows]) for c in range(len(head))]
    line = "  ".join("-" * w for w in widths)
    print(line)
    for r in [head, *rows]:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sizes", default="100,300,1000", help="series sizes to measure (default: %(default)s)")
    parser.add_argument("--heads", default="32x32", help="LAYERSxHEADS of the model (default: %(default)s)")
    parser.add_argument(
        "--hidden-size",
        type=int,
        default=128,
        help="model width; the rerun content-hashes N x the model's bytes (default: %(default)s)",
    )
    parser.add_argument("--limit", type=int, default=128, help="calibration inputs (default: %(default)s)")
    parser.add_argument(
        "--noise", type=float, default=0.5, help="drift amplitude, x the heads' spread (default: %(default)s)"
    )
    parser.add_argument(
        "--timeout", type=float, default=600, help="seconds per CLI command before it is cut (default: %(default)s)"
    )
    parser.add_argument("--keep", metavar="DIR", help="build the series and store in DIR (new) and keep them")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    n_layers, n_heads = (int(x) for x in args.heads.lower().split("x"))
    if args.keep:
        work = Path(args.keep).resolve()
        if work.exists() and any(work.iterdir()):
            raise SystemExit(f"--keep {work}: not empty; name a new folder")
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="bench-store-scale-"))
    series, store, template = work / "synthetic-olmo2", work / "store", work / "template"
    print(f"work folder: {work}{' (kept)' if args.keep else ' (removed at the end)'}")

    t_all = time.perf_counter()
    model, tok = make_template(template, n_layers, n_heads, args.hidden_size)
    model_mb = du_bytes(template) / 1e6
    hash_s = min(folder_hash_seconds(template) for _ in range(3))
    print(
        f"model: {n_layers} layers x {n_heads} heads, hidden {args.hidden_size}, {model_mb:.1f} MB on disk, "
        f"sha256 of one folder {hash_s * 1000:.1f} ms",
        flush=True,
    )
    link_checkpoints(template, series, 0, sizes[0], real=sizes[0] - 1)  # the reference: the first size's last
    builder = Builder(series, store, template, args.limit, args.noise, model, tok)
    del model
    print(
        f"real scores of the reference: {builder.seconds_base:.1f} s "
        f"({builder.base.values.shape[0]} inputs x {len(builder.base.score_fns)} functions)",
        flush=True,
    )
    seconds_first = builder.first()
    print(f"resolve_series_taus (scores + stores the reference): {seconds_first:.1f} s", flush=True)

    figs: dict[int, dict[str, float]] = {}
    build: dict[int, float] = {}
    per_ckpt: dict[int, float] = {}
    derive: dict[int, float] = {}
    hashing: dict[int, float] = {}
    build_total = seconds_first
    try:
        for n in sizes:
            have = sum(1 for p in series.iterdir() if p.is_dir())
            if n > have:
                link_checkpoints(template, series, have, n)
            print(f"N={n}: writing {n - len(builder.written)} checkpoints", flush=True)
            t0 = time.perf_counter()
            wrote = builder.write_missing()
            seconds = time.perf_counter() - t0
            per_ckpt[n] = seconds / wrote if wrote else float("nan")
            derive[n] = builder.derive()
            build_total += seconds + derive[n]
            build[n] = build_total
            hashing[n] = n * hash_s
            print(f"  built N={n}: {build_total:.1f} s cumulative", flush=True)
            figs[n] = measure(builder, n, work, args.timeout)
    except KeyboardInterrupt:
        print("interrupted: the table holds the sizes measured so far")
    if not figs:
        return
    print()
    print(
        f"store scale: {n_layers}x{n_heads} heads, {len(builder.base.score_fns)} score functions, "
        f"{builder.base.values.shape[0]} calibration inputs, default input-score policy; code on {REPO}"
    )
    print_table(
        sizes,
        figs,
        {
            "  uncached content hashing (est.)": ("s", hashing),
            "build store (cumulative)": ("s", build),
            "  write_checkpoint per ckpt": ("s", per_ckpt),
            "  derive_series at N": ("s", derive),
        },
    )
    print(f"total benchmark wall: {time.perf_counter() - t_all:.0f} s")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
