"""A series is its source, not its folder name; a report belongs to its store (issue 27 items 1 and 3, issue 30
item 4). Real track runs under the session's Prefect test server, on real local series and real stores."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dormant_tasks.outputs import OUTPUT_MARKER
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.request import TrackRequest
from flows.cli import main
from flows.track import track
from tests.builders.series import save_random_series

pytestmark = pytest.mark.usefixtures("prefect_harness")
REPO = Path(__file__).resolve().parents[2]
FAST = ["--limit", "4", "--scores", "ahon_ln,awft", "--device", "cpu"]


def run(source, store, report=False, **options):
    """A real track flow run (in-process `main` would stop the session's test server on its way out; refusals,
    which start no Prefect, go through `main`)."""
    request = TrackRequest(
        source=str(source),
        store=str(store),
        limit=4,
        score_fns=("ahon_ln", "awft"),
        device="cpu",
        report=report,
        **options,
    )
    return track(request)


def tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_locks" not in p.parts
    }


def rows(store: Path, model_id: str) -> list[tuple]:
    t = read_table(store, "head_scores", filters={"model_id": model_id})
    return sorted(zip(*(t.column(c).to_pylist() for c in ("revision", "score_fn", "layer", "head_index", "score"))))


def refused(capsys, args: list[str], *needles: str) -> str:
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def twin(tmp_path, tiny_tokenizer, random_series):
    """Another folder with `random_series`' name and checkpoint names, other weights."""
    folder = tmp_path / "elsewhere" / random_series.name
    names = sorted(p.name for p in random_series.iterdir())
    save_random_series(folder, tiny_tokenizer, names, hidden_size=32)
    return folder


def test_two_folders_of_one_name_never_share_rows(random_series, twin, tmp_path, capsys):
    store = tmp_path / "store"
    name = random_series.name
    run(random_series, store)
    first, before = rows(store, name), tree(store)
    err = refused(
        capsys, ["track", "--model", str(twin), "--store", str(store), "--no-report", *FAST], "--series-name", str(twin)
    )
    assert str(random_series.resolve()) in err
    assert tree(store) == before, "a refused run writes nothing"
    # stored apart under its own name: never merged
    run(twin, store, series_name="twin")
    assert rows(store, name) == first
    assert rows(store, "twin") and {r[4] for r in rows(store, "twin")} != {r[4] for r in first}
    sources = {
        json.loads(p.read_text())["model_id"]: json.loads(p.read_text())["source"]
        for p in (store / "sources").iterdir()
    }
    assert sources == {name: f"local:{random_series.resolve()}", "twin": f"local:{twin.resolve()}"}
    # the first series' rerun answers from its own rows; the store's names lead to their own folders
    assert run(random_series, store).analysed == 0 and rows(store, name) == first
    capsys.readouterr()
    assert main(["findings", "--model", str(twin), "--store", str(store)]) == 0  # a folder names its own series
    assert "twin" in capsys.readouterr().out
    assert main(["track", "--model", "twin", "--store", str(store), "--no-report", *FAST]) == 0  # finished: no Prefect
    assert "twin" in capsys.readouterr().out


def test_a_series_stored_before_sources_adopts_its_first_source(random_series, twin, tmp_path, capsys):
    store = tmp_path / "store"
    from dormant_tasks.checkpoints.naming import Selection

    run(random_series, store, selection=Selection(max_n=2))
    for p in (store / "sources").iterdir():  # as a store written before sources were recorded
        p.unlink()
    before = tree(store)
    twin_args = ["track", "--model", str(twin), "--store", str(store), "--no-report", *FAST]
    refused(capsys, twin_args, "--series-name", str(random_series.resolve()))  # known by its saved requests
    assert tree(store) == before
    assert run(random_series, store).analysed == 1  # its own source goes on, and is recorded at its first write
    saved = json.loads((store / "sources" / f"series={random_series.name}.json").read_text())
    assert saved["source"] == f"local:{random_series.resolve()}"
    refused(capsys, twin_args, "--series-name")


def test_a_second_stores_track_leaves_the_first_report_untouched(random_series, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DORMANT_REPORTS", str(tmp_path / "reports"))  # the default reports folder
    first, other = tmp_path / "first", tmp_path / "other"
    run(random_series, first, report=True)
    report = tmp_path / "reports" / random_series.name
    assert json.loads((report / OUTPUT_MARKER).read_text())["store"] == str(first.resolve())
    before = tree(report)
    # as a user runs it: its own process (an in-process `main` would share this session's Prefect state)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    r = subprocess.run(
        [sys.executable, "-m", "flows.cli", "track", "--model", str(random_series), "--store", str(other), *FAST],
        env={**env, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--reports-dir" in r.stderr and str(first.resolve()) in r.stderr, r.stderr
    assert tree(report) == before
    assert not other.exists(), "refused before any work"
    # with its own folder, the second store's run goes on and the first report stays
    run(random_series, other, report=True, reports_dir=str(tmp_path / "r2"))
    assert tree(report) == before and (tmp_path / "r2" / "index.html").is_file()
