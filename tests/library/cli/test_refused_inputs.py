"""Bad input to real `dormant` subprocesses (stdin closed, stderr a pipe): exit 2, ONE stderr line (progress lines
aside), no traceback, no Prefect server started (its PREFECT_HOME stays absent) and nothing created or changed
under the test's folder, also for a refusal that used to come after Prefect started (a negative --seed, a
series name the store cannot keep) or as a traceback (request files with wrong types, binary or deeply
nested JSON, a store or reports folder where no file can be created)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from dormant_tasks.tracking.request import TrackRequest
from tests.builders.processes import run_cli
from tests.builders.progress import is_progress

REPO = Path(__file__).resolve().parents[3]


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under `root` with its content's hash (a folder: "dir")."""
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _request_file(tmp_path: Path, series: Path, **change) -> Path:
    data = TrackRequest(source=str(series), store=str(tmp_path / "store"), device="cpu").to_dict()
    for key, value in change.items():
        data[key] = {**data[key], **value} if key == "selection" else value
    path = tmp_path / "request.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _write(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "request.json"
    path.write_bytes(content)
    return path


# id -> (argv of `dormant track` built from (tmp_path, series), a piece of the one error line)
CASES = {
    "seed-negative": (lambda t, s: ["--model", s, "--store", t / "store", "--seed", "-1"], "--seed must be 0 or more"),
    "request-seed-abc": (
        lambda t, s: ["--request", _request_file(t, s, seed="abc")],
        "seed (--seed) must be an integer, got 'abc'",
    ),
    "request-score-fns-5": (
        lambda t, s: ["--request", _request_file(t, s, score_fns=5)],
        "score_fns (--scores) must be a list of strings",
    ),
    "request-steps-string": (
        lambda t, s: ["--request", _request_file(t, s, selection={"steps": "0:10"})],
        "steps must be a list [A, B]",
    ),
    "request-unknown-selection-key": (
        lambda t, s: ["--request", _request_file(t, s, selection={"stepz": [0, 10]})],
        "unknown field 'stepz' (did you mean \"steps\"?)",
    ),
    "request-binary": (lambda t, s: ["--request", _write(t, bytes(range(256)) * 4)], "not a UTF-8 text file"),
    "request-deeply-nested": (
        lambda t, s: ["--request", _write(t, b'{"a":' * 100_000 + b"1" + b"}" * 100_000)],
        "nested too deeply",
    ),
    "request-not-an-object": (lambda t, s: ["--request", _write(t, b'["track"]')], "not an object"),
    "request-with-another-store": (
        lambda t, s: ["--request", _request_file(t, s), "--store", t / "other-store"],
        "--store differs from it",
    ),
    "store-where-no-file-can-be-created": (
        lambda t, s: ["--model", s, "--store", "/proc/dormant-store"],
        "no file can be created in /proc",
    ),
    "reports-dir-dot-where-no-file-can-be-created": (
        lambda t, s: ["--model", s, "--store", t / "store", "--reports-dir", "."],  # run in /proc
        "--reports-dir .: no file can be created in /proc",
    ),
    "series-name-the-store-cannot-keep": (
        lambda t, s: ["--model", t / "my series", "--store", t / "store"],
        "cannot name a store series",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_before_prefect_and_creates_nothing(case, random_series, tmp_path):
    if "no-file-can-be-created" in case and not Path("/proc/self").is_dir():
        pytest.skip("needs /proc, a folder where no file can be created")
    if case == "series-name-the-store-cannot-keep":  # a folder name with a space (a copy: a link resolves)
        shutil.copytree(random_series, tmp_path / "my series")
    build, needle = CASES[case]
    argv = ["track", *map(str, build(tmp_path, Path(random_series))), "--device", "cpu"]
    cwd = "/proc" if case.startswith("reports-dir-dot") else tmp_path
    before = _snapshot(tmp_path)
    prefect_home = tmp_path.parent / f"{tmp_path.name}-prefect-home"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(prefect_home), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    r, _ = run_cli(argv, env, cwd)
    lines = [x for x in r.stderr.strip().splitlines() if not is_progress(x)]
    assert r.returncode == 2, r.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert lines[0].startswith("dormant track: error: ") and needle in lines[0], lines
    assert not prefect_home.exists(), "a Prefect server was started"
    assert _snapshot(tmp_path) == before, "a refused run created or changed files"


@pytest.mark.parametrize("name", [".", "-x", "CON"])
def test_a_series_name_that_is_hidden_an_option_or_a_device_is_refused_in_one_line(tmp_path, capsys, name):
    from flows.cli import main

    store = tmp_path / "store"
    code = main(["track", "--model", str(tmp_path), "--store", str(store), f"--series-name={name}", "--no-report"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--series-name" in err[0] and "no device name" in err[0]
    assert not store.exists()
