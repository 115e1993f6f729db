"""The demo end to end (`make demo`, run once per pytest run: pretrain -> track -> report), the docs' numbers read
from it, a rerun answered from the store; and `dormant demo --seeds`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dormant_tasks.engine import DEFAULT_FN
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.series import SeriesView
from flows.cli.demo import DEMO_CALIBRATION
from tests.builders.cli import invoke
from tests.builders.demo import demo_numbers
from tests.builders.shared import linked_copy

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_demo_pretrains_tracks_and_reports(demo_run):
    """`make demo` (`demo_run`: `dormant demo` with its defaults, the three calibration sets, run once per pytest
    run): the checkpoints it pretrained, one result per checkpoint and set in its store, its report with the sets'
    figures, and every head's length slope defined. Read only: the run is shared."""
    series, store, reports = demo_run.series, demo_run.store, demo_run.reports
    names = sorted(p.name for p in series.iterdir() if p.is_dir())
    assert len(names) == 8  # the demo's checkpoint schedule over 600 steps (the docs say "8 checkpoints")
    assert f"tiny-olmo2: {len(names)} checkpoints analysed, 0 already stored" in demo_run.stdout
    ckpts = read_table(store, "checkpoints")
    assert sorted(set(ckpts.column("revision").to_pylist())) == names
    assert ckpts.num_rows == 3 * len(names)  # one result per checkpoint and calibration set
    assert len(SeriesView.calibration_ids(store, "tiny-olmo2")) == len(DEMO_CALIBRATION) == 3
    assert set(ckpts.column("model_id").to_pylist()) == {"tiny-olmo2"}
    html = reports / "index.html"
    assert f"report: {html}" in demo_run.stdout and html.is_file(), demo_run.stdout
    pngs = sorted(p.name for p in (reports / "figures").glob("*.png"))
    assert "dormant_percent.png" in pngs and "raster_ahon_ln.png" in pngs
    assert {"set_agreement.png", "set_raster.png", "set_length.png"} <= set(pngs)  # three calibration sets
    assert "Calibration sets" in html.read_text(encoding="utf-8")
    heads = read_table(store, "head_scores", filters={"score_fn": DEFAULT_FN})
    assert heads.num_rows
    slopes = heads.column("length_slope").to_numpy(zero_copy_only=False)
    assert np.isfinite(slopes).all()  # every set's texts vary in length: the slope is defined for every head


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


@pytest.mark.slow
def test_the_docs_quote_the_demo_run_and_a_rerun_repeats_no_warning(demo_run, tmp_path):
    """`make demo` once (`demo_run`), with its defaults: the demo passages of README.md, docs/DEMO.md and
    docs/SCORES.md are what benchmarks/demo_numbers.py writes from this run (on a failure, run the script and commit
    the docs); its tau warnings come one line per function, whatever the number of calibration sets. `dormant demo`
    again, on a copy of its store, answers from the store: no training, no model, no flow; it counts the warnings it
    already showed instead of repeating them."""
    numbers = demo_numbers()
    drift = numbers.drifted(numbers.numbers(demo_run))
    assert not drift, f"the docs' demo numbers drifted ({drift}): run `.venv/bin/python benchmarks/demo_numbers.py`"
    tau_lines = [line for line in demo_run.stderr.splitlines() if line.startswith("warning: calibration set")]
    functions = [line.split(": ")[2] for line in tau_lines if "longer than the model's context" not in line]
    assert functions and len(functions) == len(set(functions))  # one line per function across the 3 sets

    store = linked_copy(demo_run.store, tmp_path / "store")  # the run is shared
    rerun = invoke(
        ["demo", "--model", demo_run.series, "--store", store, "--reports-dir", tmp_path / "reports"],
        cwd=REPO,
        env={"PREFECT_API_URL": None},
    )
    assert rerun.code == 0 and not rerun.prefect_started, rerun.stderr[-2000:]  # answered from the store: no flow
    assert "the series and its store are complete" in rerun.stdout
    n = len([p for p in demo_run.series.iterdir() if p.is_dir()])
    assert f"0 checkpoints analysed, {n} already stored" in rerun.stdout
    assert "Flow run" not in rerun.stderr and "pretrain-tiny" not in rerun.stderr
    assert "warning:" not in rerun.stderr
    assert f"note: {len(functions)} tau warnings as when the series was tracked" in rerun.stderr
