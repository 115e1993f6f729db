"""One worker per GPU, checked on a GPU host without Prefect: the local Dask cluster a `--runner dask --device cuda`
track run starts (`dormant_tasks.cluster.make_local_cluster`, the flow's own factory) scores checkpoints of a tiny random
OLMo-2 series with the flow's per-checkpoint computation (`tracking.compute_checkpoint`, what the checkpoint task
runs), one checkpoint sent to each worker in turn, and this script checks:

- each worker's task ran on a CUDA device (the rows' `device`, and torch in the worker);
- with several GPUs, each worker on a GPU of its own (their UUIDs differ);
- the head scores equal, within 1e-4 relative, the same computation run here, in this process, on the GPU;
- every process of the cluster is gone once it is closed.

Needs torch, transformers, tokenizers, pyarrow, numpy, dask, distributed (dask-cuda where installed: then the
cluster is its LocalCUDACluster, as in a run) and this checkout; not Prefect (the script fails if anything imports
it). `--cpu-dry-run`: the same on CPU with two workers (`make test` machines), the CUDA checks left out.

    PYTHONPATH=. python benchmarks/gpu_cluster_check.py [--cpu-dry-run] [--checkpoints N]

Prints one line `gpu_cluster_check: PASS ...` or `gpu_cluster_check: FAIL ...` last; exit 0 / 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

RTOL = 1e-4


class _NoPrefect:
    """A meta path finder that refuses Prefect: the check proves the cluster and the checkpoint work need none."""

    def find_spec(self, name, path=None, target=None):
        if name == "prefect" or name.startswith(("prefect.", "prefect_")):
            raise ImportError(f"gpu_cluster_check: {name} was imported; the cluster path must not need Prefect")
        return None


def on_worker(request, revision, series):
    """The checkpoint task's computation on a worker, and where it ran: (rows, what the worker saw)."""
    import socket

    from dormant_tasks.tracking import compute_checkpoint

    rows = compute_checkpoint(request, revision, series)
    seen = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device": rows[0].checkpoint["device"],
        "prefect": any(m == "prefect" or m.startswith("prefect.") for m in sys.modules),
    }
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        seen.update(gpu=props.name, uuid=str(getattr(props, "uuid", "")), n_visible=torch.cuda.device_count())
    return rows, seen


def _is_resource_tracker(p) -> bool:
    """multiprocessing's resource tracker: this Python process's helper (started by the first worker process it
    spawned), not the cluster's; it exits with this process."""
    import psutil

    try:
        return "multiprocessing.resource_tracker" in " ".join(p.cmdline())
    except psutil.Error:
        return False


def build_series(folder: Path, n: int) -> Path:
    """A local series of `n` random tiny OLMo-2 checkpoints (2 layers x 4 heads; one seed each)."""
    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config, train_tokenizer
    from dormant_tasks.tracking.calibration import DEMO_CORPUS

    tokenizer = train_tokenizer(DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:400], vocab_size=512)
    for seed in range(n):
        torch.manual_seed(seed)
        name = f"stage1-step{seed * 10}-tokens{seed * 20}K"
        Olmo2ForCausalLM(tiny_config(tokenizer, n_layers=2, n_heads=4, hidden_size=64)).save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
    return folder


def _scores(rows) -> np.ndarray:
    keys = [("score_fn", "ascending"), ("layer", "ascending"), ("head_index", "ascending")]
    return np.concatenate([r.head_scores.sort_by(keys).column("score").to_numpy(zero_copy_only=False) for r in rows])


def check(cpu: bool, n_checkpoints: int, work: Path) -> tuple[list[str], str]:
    """(failures, summary) of one check."""
    import psutil
    from distributed import Client

    from dormant_tasks import tracking
    from dormant_tasks.cluster import gpu_resources, make_local_cluster, visible_gpus
    from dormant_tasks.tracking import TrackRequest

    failures: list[str] = []
    n_gpus = 0 if cpu else visible_gpus()
    if not cpu and n_gpus == 0:
        return ["no CUDA GPU is visible (use --cpu-dry-run on a machine without one)"], ""
    series = build_series(work / "series", max(n_checkpoints, n_gpus + 1))
    request = TrackRequest(
        source=str(series),
        store=str(work / "store"),
        runner="dask",
        device="cpu" if cpu else "cuda",
        workers=2 if cpu else None,  # on a GPU host: the flow's default, one worker per GPU
        score_fns=("ahon_ln", "awft", "lthon_ln"),
    )
    # The series' taus, as the flow fixes them (its reference checkpoint scored and stored here: the script's store).
    state = tracking.series_state(request)
    series_taus = tracking.resolve_series_taus(request, state)
    pending = tracking.pending_revisions(request, state, series_taus)

    t0 = time.perf_counter()
    cluster = make_local_cluster(request)  # the flow's factory: no Prefect API named (None)
    kind = next(c.__name__ for c in type(cluster).__mro__ if not c.__name__.startswith("_"))  # LocalCUDACluster
    client = Client(cluster)
    try:
        workers = sorted(client.scheduler_info()["workers"])
        expected = 2 if cpu else n_gpus
        if len(workers) != expected:
            failures.append(f"{len(workers)} workers, expected {expected}")
        processes = [p for p in psutil.Process().children(recursive=True)]
        futures = []
        with gpu_resources(request.device):  # the flow's annotation: each task asks one GPU
            for i, revision in enumerate(pending):
                worker = workers[i % len(workers)]  # each worker gets one in turn
                futures.append(
                    (revision, worker, client.submit(on_worker, request, revision, series_taus, workers=[worker]))
                )
        results = [(revision, worker, f.result()) for revision, worker, f in futures]
        seconds = time.perf_counter() - t0
        processes += [p for p in psutil.Process().children(recursive=True) if p not in processes]
    finally:
        client.close()
        cluster.close()
    _, alive = psutil.wait_procs([p for p in processes if not _is_resource_tracker(p)], timeout=15)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    if alive:
        failures.append(f"{len(alive)} cluster processes still running after close: {[p.pid for p in alive]}")

    uuid_of: dict[str, str] = {}
    worst = 0.0
    for revision, worker, (rows, seen) in results:
        if seen["prefect"]:
            failures.append(f"{worker} imported Prefect")
        if not cpu:
            if not str(seen["device"]).startswith("cuda") or "uuid" not in seen:
                failures.append(f"{revision.name} on {worker} ran on {seen['device']}, not CUDA")
            else:
                uuid_of[worker] = seen["uuid"]
        here = _scores(tracking.compute_checkpoint(request, revision, series_taus))  # in this process, same device
        there = _scores(rows)
        if here.shape != there.shape or not np.allclose(there, here, rtol=RTOL, atol=1e-7, equal_nan=True):
            failures.append(f"{revision.name}: the worker's scores differ from this process's")
        finite = np.isfinite(here) & np.isfinite(there)
        if finite.any():
            rel = np.abs(there[finite] - here[finite]) / np.maximum(np.abs(here[finite]), 1e-12)
            worst = max(worst, float(rel.max()))
        print(f"  {revision.name} on {worker}: {seen}", file=sys.stderr)
    if not cpu and n_gpus > 1 and len(set(uuid_of.values())) != len(uuid_of):
        failures.append(f"workers share a GPU: {uuid_of}")
    if any(m == "prefect" or m.startswith("prefect.") for m in sys.modules):
        failures.append("this process imported Prefect")
    summary = (
        f"{kind}, {len(workers)} workers, {'CPU dry run' if cpu else f'{n_gpus} GPU(s)'}, {len(results)} checkpoints "
        f"in {seconds:.1f} s, distinct GPUs {len(set(uuid_of.values())) if uuid_of else 'n/a'}, "
        f"max relative score difference {worst:.2g}, no process left: {not alive}"
    )
    return failures, summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-dry-run", action="store_true", help="a LocalCluster of 2 CPU workers; no CUDA checks")
    parser.add_argument("--checkpoints", type=int, default=3, help="checkpoints of the tiny series (at least GPUs+1)")
    args = parser.parse_args(argv)
    sys.meta_path.insert(0, _NoPrefect())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        with tempfile.TemporaryDirectory(prefix="gpu-cluster-check-") as work:
            failures, summary = check(args.cpu_dry_run, args.checkpoints, Path(work))
    except Exception as e:  # noqa: BLE001 - the summary line says it, the traceback goes before it
        traceback.print_exc()
        failures, summary = [f"{type(e).__name__}: {e}"], ""
    if failures:
        print(f"gpu_cluster_check: FAIL {'; '.join(failures)}{' (' + summary + ')' if summary else ''}")
        return 1
    print(f"gpu_cluster_check: PASS {summary}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
