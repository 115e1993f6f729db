"""The track flow under a real Prefect test server, on a real local series and a real Parquet store."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dormant_tasks.engine import TRACKED_IDS
from dormant_tasks.errors import ConfigError, StoreError
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking import checkpoint_work, series_taus, tracker
from dormant_tasks.tracking.request import TrackRequest
from flows.track import track
from tests.builders.cli import invoke
from tests.builders.track import stored_checkpoints

pytestmark = pytest.mark.usefixtures("prefect_harness")
REPO = Path(__file__).resolve().parents[2]


def _files(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file())


def _dormant_cli(*args, env=None, **kw):
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args], cwd=REPO, capture_output=True, text=True, env=env, **kw
    )


def _prefect_env():
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _count_calls(monkeypatch, *names) -> list[str]:
    """Record each call of these `tracker` functions (they still run)."""
    calls: list[str] = []
    for name in names:
        real = getattr(tracker, name)

        def counting(*a, _real=real, _name=name, **k):
            calls.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(tracker, name, counting)
    return calls


def test_track_stores_every_checkpoint_once_and_reruns_load_nothing(random_series, tmp_path, monkeypatch):
    store = tmp_path / "store"
    calls = _count_calls(monkeypatch, "plan_series", "stored_taus", "series_state")
    summary = track(TrackRequest(source=str(random_series), store=str(store), limit=6, report=False))
    assert isinstance(summary, tracker.TrackResult)
    assert summary.analysed == 3 and summary.skipped == 0 and summary.failed == ()
    assert calls == ["series_state", "plan_series"]  # the series' state asked once per run (a new series)
    ckpts = read_table(store, "checkpoints")
    assert sorted(ckpts.column("revision").to_pylist()) == sorted(p.name for p in random_series.iterdir())
    heads = read_table(store, "head_scores")
    assert heads.num_rows == 3 * len(TRACKED_IDS) * 2 * 4  # checkpoints x functions x layers x heads
    taus = read_table(store, "taus")
    ahon = [r for r in taus.to_pylist() if r["score_fn"] == "ahon"][0]
    assert ahon["source"] == "quantile" and ahon["reference_revision"] == "stage1-step25-tokens51K"
    transitions = read_table(store, "transitions")
    # every transition is a real change of state between consecutive checkpoints
    for row in transitions.to_pylist():
        assert row["from_state"] != row["to_state"]
    # a freshly tracked series knows every rate's interval, hence every transition's confidence: decided when the
    # transitions are read (a run without its report leaves the decision pending)
    assert heads.column("dormant_rate_low").null_count == heads.column("dormant_rate_high").null_count == 0
    assert transitions.column("confident").null_count == transitions.num_rows  # as stored: pending
    decided = tracker.SeriesView.open(store, summary.model_id).transitions()
    assert decided.column("confident").null_count == 0 and decided.column("blip").null_count == 0
    # the series' listing, kept for how finely changes are located (every listed checkpoint scored here)
    listed = read_table(store, "listed_checkpoints").to_pylist()
    assert sorted(r["revision"] for r in listed) == sorted(p.name for p in random_series.iterdir())
    assert all(r["available"] for r in listed) and {r["request_id"] for r in listed} == {summary.request_id}

    def no_loading(*a, **k):  # fault injection: the rerun must not load any model
        raise AssertionError("a stored checkpoint was loaded again")

    monkeypatch.setattr(checkpoint_work, "lazy_load_checkpoint", no_loading)
    before = {p: p.stat().st_mtime_ns for p in _files(store) if {"checkpoints", "listed_checkpoints"} & set(p.parts)}
    calls.clear()
    again = track(TrackRequest(source=str(random_series), store=str(store), limit=6, report=False))
    assert again.analysed == 0 and again.skipped == 3
    assert calls == ["series_state", "plan_series", "stored_taus"]  # once, and the taus are the stored ones
    assert {
        p: p.stat().st_mtime_ns for p in _files(store) if {"checkpoints", "listed_checkpoints"} & set(p.parts)
    } == before
    assert again.n_transitions == summary.n_transitions


def test_a_run_with_its_report_stores_the_confident_state_decision_and_its_summary_counts_it(random_series, tmp_path):
    """The run derives with the decision pending; its report reads the transitions (deciding them) while the run
    holds the series, so the decision is stored and the summary line counts the confident changes."""
    from flows.cli.status import series_line

    store = tmp_path / "store"
    reports = str(tmp_path / "reports")
    result = track(TrackRequest(source=str(random_series), store=str(store), limit=6, reports_dir=reports))
    view = tracker.SeriesView.open(store, result.model_id)
    assert not view.decision_pending()
    assert view.stored_transitions().equals(view.transitions())
    assert re.search(r" \(\d+ confident at BH q <= 0\.05 over 8 heads[,;] ", series_line(store, result.model_id))


def test_taus_that_differ_from_the_stored_series_are_refused(random_series, tmp_path):
    store = tmp_path / "store"
    track(
        TrackRequest(source=str(random_series), store=str(store), limit=4, score_fns=("ahon_ln", "awft"), report=False)
    )
    before = {p: p.read_bytes() for p in _files(store)}
    with pytest.raises(StoreError, match="already uses tau"):
        track(
            TrackRequest(
                source=str(random_series),
                store=str(store),
                limit=4,
                score_fns=("ahon_ln", "awft"),
                taus=("ahon_ln=0.3",),
                report=False,
            )
        )
    with pytest.raises(StoreError, match="calibration set"):
        track(
            TrackRequest(
                source=str(random_series), store=str(store), limit=5, score_fns=("ahon_ln", "awft"), report=False
            )
        )
    assert {p: p.read_bytes() for p in _files(store)} == before


def test_retau_reaggregates_from_kept_input_scores(random_series, tmp_path, monkeypatch):
    store = tmp_path / "store"
    track(TrackRequest(source=str(random_series), store=str(store), limit=4, score_fns=("ahon_ln",), report=False))
    monkeypatch.setattr(
        checkpoint_work, "lazy_load_checkpoint", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded"))
    )
    out = track(
        TrackRequest(
            source=str(random_series),
            store=str(store),
            limit=4,
            score_fns=("ahon_ln",),
            taus=("ahon_ln=0.9",),
            retau=True,
            report=False,
        )
    )
    assert out.analysed == 3
    taus = read_table(store, "taus").to_pylist()
    assert [t["tau"] for t in taus] == [0.9]
    heads = read_table(store, "head_scores", filters={"taus_id": out.taus_id})
    assert heads.num_rows == 3 * 2 * 4 and set(heads.column("tau").to_pylist()) == {0.9}
    old = read_table(store, "head_scores")
    assert old.num_rows == 2 * heads.num_rows  # the old taus' results stay (append-only), keyed by taus_id
    from flows.cli.status import series_line

    # status summarises the current taus only, not the old results beside them
    assert series_line(store, "random-olmo2").startswith("random-olmo2: 3 checkpoints, steps 0..25")


def test_cli_bad_inputs_exit_2_and_leave_the_store_untouched(random_series, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "_store.json").write_text(json.dumps({"schema_version": 999}))
    cases = [
        (["--tau", "ahon_ln"], "cannot parse --tau"),
        (["--scores", "ahon_lm"], 'did you mean "ahon_ln"'),
        (["--steps", "500:900"], "matches none"),
        ([], "schema"),
    ]
    for extra, needle in cases:
        argv = ["track", "--model", random_series, "--store", store, "--limit", "2", "--no-report", *extra]
        r = invoke(argv, cwd=REPO, env=_prefect_env())
        assert r.code == 2, (extra, r.stderr[-2000:])
        last = r.stderr.strip().splitlines()[-1]
        assert needle in last and last.startswith("dormant track: error:"), last
    assert [p.name for p in _files(store)] == ["_store.json"]


@pytest.mark.slow
def test_sigkill_mid_checkpoint_then_rerun_completes_with_each_checkpoint_once(random_series, tmp_path):
    store = tmp_path / "store"
    args = ["track", "--model", str(random_series), "--store", str(store), "--limit", "48", "--no-report"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=REPO,
        env=_prefect_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if stored_checkpoints(store) >= 1:
            break  # the reference checkpoint is stored; the next one is being scored
        time.sleep(0.05)
    assert proc.poll() is None, "the flow finished before it could be killed: make the checkpoints slower"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_with = stored_checkpoints(store)
    assert 1 <= killed_with < 3
    summary = track(TrackRequest(source=str(random_series), store=str(store), limit=48, report=False))
    assert summary.skipped == killed_with and summary.analysed == 3 - killed_with
    ckpts = read_table(store, "checkpoints", dedupe=False)
    assert sorted(ckpts.column("revision").to_pylist()) == sorted(p.name for p in random_series.iterdir())
    heads = read_table(store, "head_scores", dedupe=False)
    assert heads.num_rows == 3 * len(TRACKED_IDS) * 2 * 4
    assert not [p for p in _files(store) if p.name.startswith(".")]


def test_two_concurrent_runs_leave_no_duplicate(random_series, tmp_path):
    store = tmp_path / "store"
    args = [
        "track",
        "--model",
        str(random_series),
        "--store",
        str(store),
        "--limit",
        "8",
        "--no-report",
        "--scores",
        "ahon_ln",
        "lthon_ln",
        "awft",
    ]
    env = _prefect_env()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "flows.cli", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    ckpts = read_table(store, "checkpoints", dedupe=False)
    assert sorted(ckpts.column("revision").to_pylist()) == sorted(p.name for p in random_series.iterdir())
    heads = read_table(store, "head_scores", dedupe=False)
    assert heads.num_rows == 3 * 3 * 2 * 4
    trans = read_table(store, "transitions", dedupe=False)
    keys = list(zip(*(trans.column(c).to_pylist() for c in ("score_fn", "layer", "head_index", "to_revision"))))
    assert len(keys) == len(set(keys))
    for f in store.rglob("*.parquet"):
        pq.read_table(f)  # every file is whole


def test_deployment_reads_back_with_its_schedule_and_request(random_series, tmp_path):
    from prefect.client.orchestration import get_client

    from dormant_tasks.tracking.request import TrackRequest
    from flows.cli import build_parser
    from flows.cli.track import request_from_args
    from flows.deployments import build_deployment

    args = build_parser().parse_args(
        [
            "serve",
            "--model",
            str(random_series),
            "--store",
            str(tmp_path / "s"),
            "--max",
            "2",
            "--cron",
            "0 3 * * *",
            "--scores",
            "ahon_ln",
        ]
    )
    request = request_from_args(args)
    deployment_id = build_deployment(request, args.cron).apply()
    with get_client(sync_client=True) as client:
        d = client.read_deployment(deployment_id)
    assert d.name == "track-random-olmo2"
    assert [s.schedule.cron for s in d.schedules] == ["0 3 * * *"]
    again = TrackRequest.coerce(d.parameters["request"])  # what a scheduled run receives
    assert again == request and again.selection.max_n == 2 and again.score_fns == ("ahon_ln",)
    with pytest.raises(ConfigError, match="not a cron expression"):
        build_deployment(request, "every day")


def test_fixing_a_new_series_taus_prints_progress_on_a_pipe(random_series, tmp_path, monkeypatch, capsys):
    """Scoring the reference checkpoint of a new series (download, load, score: 150 s on a 1B model) printed
    nothing; now it prints a progress line on a pipe at least every EVERY_S seconds (shortened here, with a
    reference scoring slowed down so the heartbeat sees it), and a rerun, whose taus are stored, none."""
    from dormant_tasks import progress

    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.02)
    real = series_taus.score_checkpoint  # the reference's scoring, where the taus are fixed

    def slow(*a, **k):
        time.sleep(0.5)
        return real(*a, **k)

    monkeypatch.setattr(series_taus, "score_checkpoint", slow)
    request = TrackRequest(source=str(random_series), store=str(tmp_path / "s"), limit=4, report=False)
    track(request, progress=True)
    lines = capsys.readouterr().err.splitlines()
    ours = [x for x in lines if x.startswith("taus of random-olmo2: scoring stage1-step25-tokens51K, ")]
    assert ours and "elapsed" in ours[0] and ours[-1].endswith("(done)"), lines
    track(request, progress=True)
    assert not [x for x in capsys.readouterr().err.splitlines() if x.startswith("taus of")]
