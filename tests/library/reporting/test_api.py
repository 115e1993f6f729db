"""The public Python API (`dormant_tasks.open_store`) and its worked example, docs/examples/api_tour.py, on a
hand-built store (test_report.write_series: real Parquet written through the store's own writer)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

import dormant_tasks
from dormant_tasks.errors import StoreError
from dormant_tasks.store.io import write_table
from tests.builders.stores import CAL, MODEL, TOKENS, known_picture, write_series

ROOT = Path(__file__).resolve().parents[3]


def _evaluations(root: Path) -> None:
    common = {"model_id": MODEL, "revision": "stage1-step50-tokens4000000", "stage": 1, "step": 50, "tokens": 4_000_000}
    protocol = {
        "task": "winogrande",
        "shots": 0,
        "mode": "dynamic",
        "n_items": 40,
        "base_accuracy": 0.6,
        "code_version": "0.1.0",
        "metric": "acc,none",
        "chat_template": False,
        "bos": "paper",
        "data_source": "bundled",
        "chance": 0.5,
        "evaluated_at": datetime(2025, 1, 2, tzinfo=UTC),
    }
    rows = [
        common | protocol | {"score_fn": "ahon_ln", "quantile": q, "frac_zeroed": q, "accuracy": 0.6 - q}
        for q in (0.0, 0.1, 0.2)
    ]
    write_table(root, "evaluations", rows, file_key="run-1")


@pytest.fixture
def store(tmp_path):
    root = write_series(tmp_path / "store", {"ahon_ln": known_picture(), "lthon_ln": known_picture()[:, ::-1]}, TOKENS)
    _evaluations(root)
    return root


def test_open_store_gives_the_series_as_dataframes(store):
    s = dormant_tasks.open_store(store)
    assert s.series() == [MODEL]
    series = s[MODEL]
    assert series.calibration_id == CAL and series.score_fns == ["ahon_ln", "lthon_ln"]
    assert list(series.checkpoints()["tokens"]) == TOKENS
    masks = series.masks("ahon_ln")
    assert masks.shape == (6, 6) and list(masks.index) == series.revisions
    np.testing.assert_array_equal(masks.to_numpy(), known_picture().reshape(6, 6))  # (layer, head) column order
    assert series.mask(series.revisions[3], "ahon_ln") == {(0, 0), (1, 2)}
    assert len(series.scores()) == 2 * 6 * 6 and set(series.scores("lthon_ln")["score_fn"]) == {"lthon_ln"}
    t = series.transitions("ahon_ln")
    assert sorted(zip(t["layer"], t["head_index"], t["to_state"])) == [
        (0, 0, "dormant"),
        (1, 2, "active"),
        (1, 2, "dormant"),
    ]
    table = series.findings("ahon_ln")  # the published findings table: a row per quantity, by id and label
    f = table.set_index(["finding", "quantity"])
    assert f.loc[("transitions", "n_transitions"), "value"] == 3 and f.loc[("transitions", "n_transitions"), "label"]
    assert f.loc[("transitions", "ever_changed"), "n_units"] == 2  # the bootstrap's units: 2 layers
    assert f.loc[("emergence", "pct_dormant_last"), "value"] == pytest.approx(100 / 6)
    assert set(table["score_fn"]) == {"ahon_ln"} and table["label"].notna().sum() >= 15
    ev = series.evaluations()
    assert list(ev["accuracy"]) == pytest.approx([0.6, 0.5, 0.4]) and str(ev["shots"].dtype) == "Int32"


def test_an_unknown_series_names_what_the_store_holds(store):
    with pytest.raises(StoreError, match="tiny-series"):
        dormant_tasks.open_store(store)["test-org/tiny-serie"]


def test_import_dormant_tasks_is_light():
    code = "import sys, dormant_tasks; print(sorted(m for m in ('torch', 'pandas', 'pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_api_tour_example_runs(store):
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "api_tour.py"), str(store)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"series in the store: ['{MODEL}']" in out.stdout
    assert "the first head to fall dormant, per layer:" in out.stdout
    assert "3 transitions" in out.stdout and "3 evaluation rows" in out.stdout
