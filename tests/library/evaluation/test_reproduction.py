"""`dormant evaluate --reproduce-seed`: its runs, what counts as done (resuming), its forward-token estimate."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dormant_tasks.evaluation.reproduction import (
    done_runs,
    forward_tokens,
    reproduction_requests,
    seed_functions,
    seed_models,
)
from dormant_tasks.evaluation.request import DEFAULT_QUANTILES
from dormant_tasks.store.io import write_table

REPO = Path(__file__).resolve().parents[3]


def test_the_runs_are_the_seed_models_times_the_authors_functions(tmp_path):
    models, fns = seed_models(), seed_functions()
    assert len(models) == 14 and models[0] == "allenai/OLMo-2-1124-7B-Instruct"
    assert len(fns) == 14 and {"random", "awft", "ahon_ln", "lthon_hn"} <= set(fns) and "fhon" not in fns
    requests = reproduction_requests(tmp_path / "store")
    assert len(requests) == 14 * 14 == len({(r.model, r.score_fns) for r in requests})
    r = requests[0]
    assert (r.tasks, r.rendering, r.precision, r.thresholds, r.bos) == (
        ("winogrande",),
        "paper",
        "paper",
        "authors",
        "paper",
    )
    assert r.quantiles == DEFAULT_QUANTILES and r.shots is None  # the authors' 5 shots


def _rows(model, fn, quantiles, **protocol):
    base = {
        **{"model_id": model, "revision": "main", "stage": -1, "step": -1, "tokens": -1, "task": "winogrande"},
        **{"shots": 5, "mode": "dynamic", "score_fn": fn, "tau": 0.5, "frac_zeroed": 0.1, "accuracy": 0.7},
        **{"n_items": 1267, "base_accuracy": 0.7, "code_version": "t", "request_id": f"{model}{fn}"},
        **{"metric": "acc,none", "chat_template": False, "bos": "paper", "data_source": "hub"},
        **{"evaluated_at": datetime(2026, 1, 1, tzinfo=UTC), "rendering": "paper"},
        **{"precision": "paper:float16+int8", "threshold_source": "authors"},
    }
    return [{**base, "quantile": q, **protocol} for q in quantiles]


def test_done_runs_are_those_stored_under_the_paper_protocol(tmp_path):
    store = tmp_path / "store"
    assert done_runs(store) == set()  # no store yet: everything to run
    olmo = "allenai/OLMo-2-1124-7B"
    write_table(store, "evaluations", _rows(olmo, "ahon_ln", DEFAULT_QUANTILES), file_key="a")
    write_table(store, "evaluations", _rows(olmo, "awft", DEFAULT_QUANTILES[:6]), file_key="b")  # cut short
    write_table(store, "evaluations", _rows(olmo, "lthon_ln", DEFAULT_QUANTILES, threshold_source="own"), file_key="c")
    write_table(store, "evaluations", _rows(olmo, "avvn", DEFAULT_QUANTILES, precision="float32"), file_key="d")
    assert done_runs(store) == {(olmo, "ahon_ln")}
    assert done_runs(store, limit=50) == set()  # a run on all items is not the run of --limit 50


@pytest.mark.slow
def test_forward_tokens_count_each_distinct_row_per_setting(tiny_tokenizer, tmp_path):
    from dormant_tasks.evaluation.lm_tasks import load_tasks

    (request,) = [
        r
        for r in reproduction_requests(tmp_path / "s", limit=3)
        if r.model == "allenai/OLMo-2-1124-7B" and r.score_fns == ("awft",)
    ]
    request = type(request).from_dict({**request.to_dict(), "datasets": "bundled"})
    got = forward_tokens(request, tiny_tokenizer)
    # brute force: WinoGrande's 3 items x 2 options, each row = the whole text's tokens less the last one
    loaded = load_tasks("winogrande", data_source="bundled")
    task = loaded.tasks["winogrande"]
    task.build_all_requests(limit=3, rank=0, world_size=1)
    texts = {inst.args[0] + inst.args[1] for inst in task.instances}
    assert len(texts) == 6
    per_setting = sum(len(tiny_tokenizer.encode(t, add_special_tokens=False)) - 1 for t in texts)
    assert got == (1 + 7) * per_setting


def test_dry_run_lists_every_run_and_loads_no_model(tmp_path):
    store = tmp_path / "store"
    write_table(store, "evaluations", _rows("Qwen/Qwen2.5-0.5B", "ahon_ln", DEFAULT_QUANTILES), file_key="a")
    r = subprocess.run(
        [sys.executable, "-m", "flows.cli", "evaluate", "--reproduce-seed", "--dry-run", "--store", str(store)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    runs = [line for line in lines[1:-1]]
    assert len(runs) == 196
    assert any(line.startswith("Qwen/Qwen2.5-0.5B") and " ahon_ln " in line and " done " in line for line in runs)
    assert lines[-1].startswith("195 of 196 runs to do")
    bad = subprocess.run(
        [sys.executable, "-m", "flows.cli", "evaluate", "--reproduce-seed", "--model", "x", "--store", str(store)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},  # no Hub here: the cheap checks would refuse the id "x" first
    )
    assert bad.returncode == 2 and bad.stderr.strip().endswith("drop --model")


def test_dry_run_without_a_hub_asks_the_probe_once_and_never_retries(tmp_path):
    """No offline variable set and no Hub (HF_ENDPOINT on a closed loopback port, the Hub's absence here made
    deterministic): the probe's answer switches the run offline, so the plan comes at once, tokens unknown."""
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_ENDPOINT": f"http://127.0.0.1:{port}"}
    env |= {k: os.environ[k] for k in ("HF_HOME", "HOME", "DORMANT_CACHE_DIR") if k in os.environ}
    start = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "evaluate",
            "--reproduce-seed",
            "--dry-run",
            "--store",
            str(tmp_path / "s"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    seconds = time.monotonic() - start
    assert r.returncode == 0, r.stderr[-2000:]
    assert seconds < 10, seconds
    out = r.stdout + r.stderr
    assert "Retry" not in out and "thrown while requesting" not in out, out[:2000]
    assert r.stdout.splitlines()[-1].startswith("196 of 196 runs to do")
    assert "does not answer" in r.stderr and "n/a (not cached)" in r.stdout
