"""Ctrl-C and expected failures of `dormant`: exit codes, stderr, and what the store keeps.

A run that is signalled, or whose temporary Prefect server's shutdown is what is tested, is a real `dormant`
subprocess that starts its own temporary server (no PREFECT_API_URL), as a user's does; the signal goes to the
run's whole process group, as a terminal's Ctrl-C does. The other failures run in-process (tests/builders/cli.py),
their flows on the session's Prefect test server. Faked, because it cannot be timed otherwise:
"SIGINT during a write" slows the head_scores write down by a sitecustomize hook (see `_SLOW_WRITE`); a
full disk is a real size-limited tmpfs filled while the run goes on, a read-only store a real read-only
bind mount (both skipped where mounting is not allowed); the temporary server's shutdown logging a cancelled
database rollback (it does when its services are cancelled inside a transaction) is a record that the server
process always logs at exit, by a sitecustomize hook (see `_SHUTDOWN_RECORD`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dormant_tasks.engine import TRACKED_IDS
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.request import TrackRequest
from flows.track import track
from tests.builders.cli import Result, invoke
from tests.builders.progress import is_progress
from tests.builders.series import save_random_series
from tests.builders.track import store_rows, stored_checkpoints

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
EXIT_WITHIN_S = 5.0

# Imported by every Python process of a run whose PYTHONPATH holds its folder: the head_scores write of
# each checkpoint first touches a marker file, then takes 4 s, so a signal can land inside it.
_SLOW_WRITE = """
import os, time
import pyarrow.parquet as pq
_write = pq.write_table
def _slow(table, where, *a, **k):
    if "dormant" in table.column_names:  # a head_scores file
        open(os.environ["DORMANT_TEST_WRITE_MARKER"], "a").close()
        time.sleep(4)
    return _write(table, where, *a, **k)
pq.write_table = _slow
"""

# The same for the transitions file of a run (issue 27: an interrupt there lost the derived tables for good).
_SLOW_TRANSITIONS_WRITE = _SLOW_WRITE.replace('"dormant" in table.column_names', '"from_state" in table.column_names')

# Imported by every Python process of a run whose PYTHONPATH holds its folder: the temporary Prefect server's
# process logs what SQLAlchemy logs when stopping the server cancels a rollback (issue 24), once its shutdown
# is done: uvicorn then re-raises the SIGTERM it caught (the process ends without running atexit handlers).
_SHUTDOWN_RECORD = """
import asyncio, atexit, logging, os, signal
if os.environ.get("PREFECT__SERVER_EPHEMERAL") == "1":  # the temporary server's process only
    _logged = []
    def _a_cancelled_rollback():
        if not _logged:
            _logged.append(True)
            try:
                raise asyncio.CancelledError
            except asyncio.CancelledError:
                logging.getLogger("sqlalchemy.pool.impl.AsyncAdaptedQueuePool").error(
                    "Exception during reset or similar", exc_info=True
                )
    _raise_signal = signal.raise_signal
    def _raise_after_the_record(sig):
        _a_cancelled_rollback()
        _raise_signal(sig)
    signal.raise_signal = _raise_after_the_record
    atexit.register(_a_cancelled_rollback)  # a server that ends without a signal
"""


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # the run's own temporary server
    return {**env, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "HF_HUB_OFFLINE": "1", **extra}


def _start(args, env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _children(pid: int) -> list[str]:
    """The command lines of `pid`'s children. A thread or a child may end between the listing and the read: what
    is gone by then is not counted."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended after the listing
            continue
        for child in children:
            try:
                out.append(Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                pass
    return out


def _wait_for(condition, proc, timeout=240.0, what=""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {what}: {proc.stderr.read()[-2000:]}")
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _interrupt(proc) -> tuple[float, str]:
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's foreground process group
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    return time.monotonic() - t0, err


def _no_temp_files(store: Path) -> list[Path]:
    return [p for p in store.rglob("*") if p.name.startswith(".") and p.is_file()]


@pytest.mark.parametrize("moment", ["prefect-start", "mid-scoring", "during-write"])
def test_sigint_stops_within_5_s_and_a_rerun_stores_every_checkpoint_once(moment, random_series, tmp_path):
    store = tmp_path / "store"
    args = ["track", "--model", str(random_series), "--store", str(store), "--limit", "400", "--no-report"]
    env = _env()
    if moment == "during-write":
        hook = tmp_path / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(_SLOW_WRITE)
        marker = tmp_path / "writing"
        env = _env(PYTHONPATH=f"{hook}{os.pathsep}{env.get('PYTHONPATH', '')}", DORMANT_TEST_WRITE_MARKER=str(marker))
    proc = _start(args, env)
    if moment == "prefect-start":
        _wait_for(lambda: any("uvicorn" in c for c in _children(proc.pid)), proc, what="the server to start")
    elif moment == "mid-scoring":
        _wait_for(lambda: stored_checkpoints(store) >= 1, proc, what="the first stored checkpoint")
    else:
        _wait_for(marker.exists, proc, what="a head_scores write")
        time.sleep(1.0)
    seconds, err = _interrupt(proc)
    assert proc.returncode == 130, err[-2000:]
    assert seconds < EXIT_WITHIN_S, f"exit took {seconds:.1f} s"
    # on a pipe the run's progress lines come first (issue 23: never silent); besides them, exactly one line:
    # no traceback, no record of the server's shutdown
    lines = [x for x in err.strip().splitlines() if not is_progress(x)]
    assert len(lines) == 1, err[-3000:]
    assert lines[0].startswith("dormant track: interrupted: ") and lines[0].endswith("stored, rerun to continue"), err
    assert not _no_temp_files(store) if store.exists() else True

    summary = track(TrackRequest(source=str(random_series), store=str(store), limit=400, report=False))
    ckpts = read_table(store, "checkpoints", dedupe=False)
    assert sorted(ckpts.column("revision").to_pylist()) == sorted(p.name for p in random_series.iterdir())
    assert summary.analysed + summary.skipped == 3
    assert read_table(store, "head_scores", dedupe=False).num_rows == 3 * len(TRACKED_IDS) * 2 * 4
    assert not _no_temp_files(store)


def _checksum(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")) if root.exists() else []:
        if p.is_file() and "_locks" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def _run(args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=REPO,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _in_process(args, api: str, **env) -> Result:
    """`dormant ARGS` in-process, its flows on the session's test server `api`, no Hub unless `env` says."""
    return invoke(args, cwd=REPO, env={"PREFECT_API_URL": api, "HF_HUB_OFFLINE": "1", **env})


def _assert_one_line_error(r: subprocess.CompletedProcess | Result, command: str, needle: str) -> None:
    lines = [x for x in r.stderr.strip().splitlines() if not is_progress(x)]
    code = r.code if isinstance(r, Result) else r.returncode
    assert code == 2, r.stderr[-3000:]
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith(f"dormant {command}: error: ") and needle in lines[0], lines


def _four_checkpoint_series(random_series, tmp_path, tiny_tokenizer) -> Path:
    series = Path(shutil.copytree(random_series, tmp_path / "random-olmo2"))
    save_random_series(series, tiny_tokenizer, ["stage1-step40-tokens82K"], first_seed=3)  # the fourth, the reference
    return series


def _truncate(weights: Path) -> None:
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 3)


def test_a_truncated_checkpoint_among_four_is_recorded_the_run_goes_on_and_a_rerun_stores_it(
    random_series, tmp_path, tiny_tokenizer, prefect_api_url
):
    series = _four_checkpoint_series(random_series, tmp_path, tiny_tokenizer)
    bad = "stage1-step10-tokens20K"
    good = sorted(p.name for p in series.iterdir() if p.name != bad)
    _truncate(series / bad / "model.safetensors")
    store = tmp_path / "store"
    args = ["track", "--model", str(series), "--store", str(store), "--limit", "4", "--no-report"]
    r = _in_process(args, prefect_api_url)
    assert r.code == 3, r.stderr[-3000:]  # not 2 (bad input), not 130 (interrupted)
    assert "random-olmo2: 3 checkpoints analysed, 0 already stored, 1 failed" in r.stdout, r.stdout
    assert f"  1 checkpoint failed, not stored (a rerun of `dormant track` retries):\n    {bad}: " in r.stdout
    assert "the file is cut short" in r.stdout and "--model" not in r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("dormant track: 1 checkpoint of random-olmo2 failed") and f"({bad})" in last, last
    assert last.endswith("exit 3") and "Traceback" not in r.stderr
    assert sorted(set(read_table(store, "checkpoints").column("revision").to_pylist())) == good
    status = _in_process(["status", "--store", str(store)], prefect_api_url)
    assert status.code == 0 and f"    {bad}: " in status.stdout and "the file is cut short" in status.stdout

    # --fail-fast: today's behaviour, one line, exit 2, the store as it was
    before = _checksum(store)
    r = _in_process([*args, "--fail-fast"], prefect_api_url)
    _assert_one_line_error(r, "track", "the file is cut short")
    assert _checksum(store) == before

    # fixed on disk: the same command stores it, the failure is gone from the store and from status
    shutil.rmtree(series / bad)
    shutil.copytree(random_series / bad, series / bad)
    summary = track(TrackRequest(source=str(series), store=str(store), limit=4, report=False))
    assert (summary.analysed, summary.skipped, summary.failed) == (1, 3, ())
    assert sorted(set(read_table(store, "checkpoints").column("revision").to_pylist())) == sorted([*good, bad])
    status = _in_process(["status", "--store", str(store)], prefect_api_url)
    assert "failed" not in status.stdout and status.stdout.startswith("random-olmo2: 4 checkpoints"), status.stdout


@pytest.mark.parametrize("case", ["error", "normal-end", "error-verbose"])
def test_the_temporary_servers_shutdown_records_stay_off_the_console(case, random_series, tmp_path):
    """Issue 24: what the temporary server logs while it stops (a cancelled rollback's traceback) is not on
    stderr after a failure or a normal end; `--verbose` shows it (which proves that the hook logged it)."""
    series = Path(shutil.copytree(random_series, tmp_path / "random-olmo2"))
    weights = series / "stage1-step10-tokens20K" / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 3)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SHUTDOWN_RECORD)
    args = ["track", "--model", str(series), "--store", str(tmp_path / "store"), "--limit", "4", "--no-report"]
    # an error: the truncated checkpoint with --fail-fast (without it the run records it, goes on and exits 3)
    args += {"error": ["--fail-fast"], "normal-end": ["--steps", "0:0"], "error-verbose": ["--verbose", "--fail-fast"]}[
        case
    ]
    r = _run(args, PYTHONPATH=f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if case == "error":
        _assert_one_line_error(r, "track", "the file is cut short")
    elif case == "normal-end":
        assert r.returncode == 0, r.stderr[-3000:]
        # stderr holds diagnostics only: progress lines and the taus' warnings, nothing of the server's shutdown
        rest = [x for x in r.stderr.splitlines() if not is_progress(x) and not x.startswith("warning: ")]
        assert rest == [], r.stderr[-3000:]
    else:
        assert r.returncode == 2, r.stderr[-3000:]
        assert "Exception during reset or similar" in r.stderr and "CancelledError" in r.stderr, r.stderr[-3000:]
        assert r.stderr.strip().splitlines()[-1].startswith("dormant track: error: "), r.stderr[-3000:]


@pytest.mark.parametrize("case", ["missing-path", "unreachable-hub", "store-is-a-file"])
def test_evaluate_errors_are_one_line_and_write_nothing(case, tiny_model_dir, tmp_path, prefect_api_url, monkeypatch):
    store = tmp_path / "store"
    model, env, needle = str(tiny_model_dir), {}, ""
    if case == "missing-path":
        model, needle = str(tmp_path / "no-such-checkpoint"), "no such folder"
    elif case == "unreachable-hub":
        model, needle = "allenai/OLMo-2-1124-7B", "does not answer"  # the CLI's one probe, before any import
        env = {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens on port 9
        import huggingface_hub.constants as constants

        monkeypatch.setattr(constants, "ENDPOINT", env["HF_ENDPOINT"])  # as a fresh process reads it on import
    else:
        store.write_text("not a store")
        needle = "is a file, not a folder"
    before = _checksum(tmp_path)
    r = _in_process(["evaluate", "--model", model, "--store", str(store), "--limit", "2"], prefect_api_url, **env)
    _assert_one_line_error(r, "evaluate", needle)
    assert _checksum(tmp_path) == before


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def test_a_read_only_store_answers_a_finished_rerun_and_refuses_work_before_any(random_series, tmp_path):
    store = tmp_path / "store"
    track(TrackRequest(source=str(random_series), store=str(store), limit=4, score_fns=("ahon_ln",), report=False))
    if not _mount(["--bind", "-o", "ro", str(store), str(store)]):
        pytest.skip("bind mounts are not allowed here")
    try:
        before = _checksum(store)
        same = ["track", "--model", str(random_series), "--store", str(store), "--limit", "4", "--scores", "ahon_ln"]
        r = _run([*same, "--no-report"])  # nothing to do: answered from the store, as `status` would
        assert r.returncode == 0 and "0 checkpoints analysed, 3 already stored" in r.stdout, r.stderr[-2000:]
        t0 = time.monotonic()
        r = _run([*same, "--tau", "ahon_ln=0.5", "--retau", "--no-report"])  # work to do: refused first
        _assert_one_line_error(r, "track", "Read-only file system")
        assert time.monotonic() - t0 < 30  # refused before Prefect starts or a model loads
        assert _checksum(store) == before
    finally:
        subprocess.run(["umount", "--lazy", str(store)], check=True)  # as the disk test: never "busy"


def test_a_disk_that_fills_during_the_run_keeps_every_earlier_checkpoint(random_series, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount(["-t", "tmpfs", "-o", "size=6m", "tmpfs", str(disk)]):
        pytest.skip("tmpfs mounts are not allowed here")
    try:
        store = disk / "store"
        proc = _start(
            [
                "track",
                "--model",
                str(random_series),
                "--store",
                str(store),
                "--limit",
                "400",
                "--no-report",
                "--input-scores",
                "keep",
                "--scores",
                "ahon_ln",
                "awft",
                "lthon",
            ],
            _env(),
        )
        _wait_for(lambda: stored_checkpoints(store) >= 1, proc, what="the first stored checkpoint")
        # fill the rest of the disk while the next one is scored; unbuffered, so that no close re-raises ENOSPC
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * 65536)
        except OSError:
            pass
        finally:
            os.close(fd)
        _, err = proc.communicate(timeout=600)
        lines = [x for x in err.strip().splitlines() if not is_progress(x)]
        assert proc.returncode == 2 and len(lines) == 1, err[-3000:]
        assert "No space left on device" in lines[0] and lines[0].startswith("dormant track: error: ")
        (disk / "filler").unlink()
        ckpts = read_table(store, "checkpoints", dedupe=False)
        assert ckpts.num_rows >= 1
        for p in store.rglob("*.parquet"):
            pq.read_table(p)  # every file that is there is whole
        assert not _no_temp_files(store)
    finally:
        # lazy: detached now, freed once nothing holds it (under load an exiting run's files were still open:
        # "target is busy" failed the test after every assertion had passed)
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def _slow_env(tmp_path, hook_code: str) -> tuple[dict, Path]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(hook_code)
    marker = tmp_path / "writing"
    env = _env(
        PYTHONPATH=f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", DORMANT_TEST_WRITE_MARKER=str(marker)
    )
    return env, marker


def test_sigint_during_the_transitions_write_then_a_plain_rerun_gives_a_clean_runs_store(random_series, tmp_path):
    """Issue 27: the rerun answered "0 analysed, 3 already stored, transitions 0" and never derived them."""
    clean = tmp_path / "clean"
    track(TrackRequest(source=str(random_series), store=str(clean), limit=400, report=False))
    store = tmp_path / "store"
    args = ["track", "--model", str(random_series), "--store", str(store), "--limit", "400", "--no-report"]
    env, marker = _slow_env(tmp_path, _SLOW_TRANSITIONS_WRITE)
    proc = _start(args, env)
    _wait_for(marker.exists, proc, what="the transitions write")
    time.sleep(1.0)
    _, err = _interrupt(proc)
    assert proc.returncode == 130, err[-2000:]
    assert not list((store / "transitions").rglob("*.parquet"))  # the write was cut: no transitions stored

    r = _run(args)  # plain rerun: every checkpoint stored, answered without Prefect
    assert r.returncode == 0 and "0 checkpoints analysed, 3 already stored" in r.stdout, r.stderr[-2000:]
    # nothing but progress and the stored series' tau warnings (printed on every run, as the report shows them)
    assert [x for x in r.stderr.splitlines() if not is_progress(x) and not x.startswith("warning: ")] == []
    assert store_rows(store) == store_rows(clean)
    assert store_rows(store)["transitions"]  # something to lose


def test_two_runs_on_one_series_one_writes_the_others_wait_or_are_refused(random_series, tmp_path):
    """Issue 27: two runs a second apart with --limit 32 and --limit 16 both exited 0 and left one series with
    two calibration sets; now the second waits for the first, with a line, then sees its results."""
    store = tmp_path / "store"
    base = ["track", "--model", str(random_series), "--store", str(store), "--no-report"]
    env, _ = _slow_env(tmp_path, _SLOW_WRITE)  # the first run lasts: 4 s per checkpoint write
    first = _start([*base, "--limit", "32"], env)
    holder = store / "_locks" / "random-olmo2.pid"  # the lock's holder writes its pid beside the lock file
    t0 = time.monotonic()  # it holds the series from its start; today's code takes no lock before its writes
    while not (holder.is_file() and holder.read_text().strip() == str(first.pid)) and time.monotonic() - t0 < 3:
        time.sleep(0.05)

    refused = _run([*base, "--limit", "16", "--no-wait"])
    _assert_one_line_error(
        refused, "track", f"another run is writing series random-olmo2 of {str(store)!r} (pid {first.pid})"
    )
    other = _start([*base, "--limit", "16"], _env())  # another calibration set: waits, then refused by the series
    same = _start([*base, "--limit", "32"], _env())  # the same request: waits, then answers from the store
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    _, other_err = other.communicate(timeout=300)
    same_out, same_err = same.communicate(timeout=300)
    waiting = f"waiting for another run on random-olmo2 (pid {first.pid}): 0s elapsed (started)"
    for err in (other_err, same_err):
        assert waiting in err.splitlines(), err[-3000:]
    lines = [x for x in other_err.strip().splitlines() if not x.startswith("waiting for another run on ")]
    assert other.returncode == 2 and len(lines) == 1, other_err[-3000:]
    assert lines[0].startswith("dormant track: error: series 'random-olmo2' was tracked with calibration set(s)")
    assert same.returncode == 0 and "0 checkpoints analysed, 3 already stored" in same_out, same_err[-3000:]

    taus = read_table(store, "taus")
    assert len(set(taus.column("calibration_id").to_pylist())) == 1
    ckpts = read_table(store, "checkpoints", dedupe=False)
    assert ckpts.num_rows == 3 and len(set(ckpts.column("calibration_id").to_pylist())) == 1
