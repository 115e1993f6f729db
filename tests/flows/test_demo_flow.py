"""The demo flow end to end on a short tiny run: pretrain -> track -> report, then a rerun answered from the store."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.series import SeriesView
from flows.cli.demo import DEMO_CALIBRATION
from tests.builders.cli import invoke

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_short_demo_pretrains_tracks_and_reports(short_demo, tmp_path):
    """The demo flow (`short_demo`: 30 steps, 8 texts per set, the three sets), then `dormant demo` again on a copy
    of its store, answered from the store."""
    series, summary, reports = short_demo.series, short_demo.result, short_demo.reports
    store = tmp_path / "store"  # a copy: the run is shared
    shutil.copytree(short_demo.store, store)
    names = sorted(p.name for p in series.iterdir() if p.is_dir())
    assert summary.analysed == len(names) == 4  # steps 0, 10, 25 and 30 (the last, off the checkpoint schedule)
    ckpts = read_table(store, "checkpoints")
    assert sorted(set(ckpts.column("revision").to_pylist())) == names
    assert ckpts.num_rows == 3 * len(names)  # one result per checkpoint and calibration set
    assert len(SeriesView.calibration_ids(store, "tiny-olmo2")) == len(DEMO_CALIBRATION) == 3
    assert set(ckpts.column("model_id").to_pylist()) == {"tiny-olmo2"}
    html = Path(summary.report)
    assert html == reports / "index.html" and html.is_file()
    pngs = sorted(p.name for p in (reports / "figures").glob("*.png"))
    assert "dormant_percent.png" in pngs and "raster_ahon_ln.png" in pngs
    assert {"set_agreement.png", "set_raster.png", "set_length.png"} <= set(pngs)  # three calibration sets
    assert "Calibration sets" in html.read_text(encoding="utf-8")
    heads = read_table(store, "head_scores", filters={"score_fn": DEFAULT_FN})
    assert heads.num_rows
    slopes = heads.column("length_slope").to_numpy(zero_copy_only=False)
    assert np.isfinite(slopes).all()  # every set's texts vary in length: the slope is defined for every head

    # `dormant demo` on the complete series and store answers from the store: no training, no model, no flow
    r = invoke(
        [
            "demo",
            "--model",
            series,
            "--store",
            store,
            "--steps",
            short_demo.steps,
            "--limit",
            short_demo.limit,
            "--reports-dir",
            tmp_path / "reports",  # the run's own belongs to the run's store, not to this copy
        ],
        cwd=REPO,
        env={"PREFECT_API_URL": None},
    )
    assert not r.prefect_started  # answered from the store: no flow
    assert r.code == 0, r.stderr[-2000:]
    assert "the series and its store are complete" in r.stdout
    assert "0 checkpoints analysed, 4 already stored" in r.stdout
    assert "Flow run" not in r.stderr and "pretrain-tiny" not in r.stderr


@pytest.mark.slow
def test_demo_seeds_pretrains_one_series_per_seed_and_states_the_findings_over_them(tmp_path, prefect_api_url):
    """`dormant demo --seeds 2`: seeds 0 and 1 in `tiny` and `tiny-seed1`, each tracked alike, then the findings
    over the seeds (two seeds: the mean and range, no interval). 10 steps: two checkpoints a seed (0 and 10)."""
    series, store = tmp_path / "tiny", tmp_path / "store"
    r = invoke(  # in-process, its flows on the session's Prefect test server
        ["demo", "--model", series, "--store", store, "--steps", "10", "--limit", "8", "--calibration", "winogrande"]
        + ["--seeds", "2", "--reports-dir", tmp_path / "r"],
        cwd=tmp_path,  # the second seed's report goes to the default folder, ./reports/tiny-seed1
        env={"PREFECT_API_URL": prefect_api_url, "HF_HUB_OFFLINE": "1"},
    )
    assert r.code == 0, r.stderr[-2000:]
    assert (tmp_path / "tiny-seed1").is_dir() and (tmp_path / "r" / "index.html").is_file()
    assert set(read_table(store, "checkpoints").column("model_id").to_pylist()) == {"tiny", "tiny-seed1"}
    assert "Findings over 2 seeds of one recipe (tiny, tiny-seed1)" in r.stdout
    assert "no interval: 2 seeds, fewer than 5" in r.stdout


def _demo_numbers():
    """benchmarks/demo_numbers.py (a script, not a package module), imported from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_numbers", REPO / "benchmarks" / "demo_numbers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_docs_quote_a_demo_run_and_a_rerun_repeats_no_warning(tmp_path, prefect_api_url, monkeypatch):
    """`make demo` once, with its defaults: the demo passages of README.md and docs/SCORES.md are what
    benchmarks/demo_numbers.py writes from this run (on a failure, run the script and commit the docs); its tau
    warnings come one line per function, whatever the number of calibration sets; a rerun answers from the store
    and counts the warnings it already showed instead of repeating them."""
    numbers = _demo_numbers()
    monkeypatch.setenv("PREFECT_API_URL", prefect_api_url)  # its `dormant demo` process: no server of its own
    run = numbers.run_demo(tmp_path)
    drift = numbers.drifted(numbers.numbers(run))
    assert not drift, f"the docs' demo numbers drifted ({drift}): run `.venv/bin/python benchmarks/demo_numbers.py`"
    tau_lines = [line for line in run.stderr.splitlines() if line.startswith("warning: calibration set")]
    functions = [line.split(": ")[2] for line in tau_lines if "longer than the model's context" not in line]
    assert functions and len(functions) == len(set(functions))  # one line per function across the 3 sets

    rerun = invoke(
        ["demo", "--model", run.series, "--store", run.store, "--reports-dir", tmp_path / "reports"],
        cwd=REPO,
        env={"PREFECT_API_URL": None},
    )
    assert rerun.code == 0 and not rerun.prefect_started, rerun.stderr[-2000:]
    assert "the series and its store are complete" in rerun.stdout
    assert "warning:" not in rerun.stderr
    assert f"note: {len(functions)} tau warnings as when the series was tracked" in rerun.stderr
