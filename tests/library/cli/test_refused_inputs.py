"""Bad input to `dormant` (in-process, stderr not a terminal: tests/builders/cli.py): exit 2, ONE stderr line (progress
lines aside), no traceback, no Prefect started (nor imported: all of them in one fresh process whose PREFECT_HOME
stays absent) and nothing created or changed
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
from tests.builders.cli import in_one_process, invoke
from tests.builders.progress import is_progress

REPO = Path(__file__).resolve().parents[3]


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under `root` with its content's hash (a folder: "dir", a symbolic link: "link")."""
    out = {}
    for p in sorted(root.rglob("*")):
        kind = "link" if p.is_symlink() else "dir" if p.is_dir() else None
        out[str(p.relative_to(root))] = kind or hashlib.sha256(p.read_bytes()).hexdigest()
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
        "its folder name 'my series' cannot name a stored series",
    ),
    # before: refused without naming --series-name, which stores it under another name
    "series-folder-named-in-unicode": (
        lambda t, s: ["--model", t / "sériés", "--store", t / "store"],
        "add --series-name NAME, e.g. --series-name series",
    ),
    # before: 0% dormant everywhere, with advice to change tau
    "budget-one": (
        lambda t, s: ["--model", s, "--store", t / "store", "--budget", "1"],
        "--budget 1: the search scores at least the first and the last checkpoint",
    ),
    "resolution-without-budget": (
        lambda t, s: ["--model", s, "--store", t / "store", "--resolution", "0.1"],
        "--resolution stops the refinement of a --budget run: add --budget N",
    ),
    "budget-with-retau": (
        lambda t, s: ["--model", s, "--store", t / "store", "--budget", "4", "--retau"],
        "--budget with --retau",
    ),
    "max-tokens-one": (
        lambda t, s: ["--model", s, "--store", t / "store", "--max-tokens", "1"],
        "--max-tokens 1: with one token each head can attend only to that token",
    ),
    # before: "no such folder", though `ls` lists it
    "model-a-symlink-loop": (
        lambda t, s: ["--model", "loop", "--store", t / "store"],  # a bare name: before, read as a Hub id
        "--model loop is a symbolic link that leads to no folder (a loop, or a missing target",
    ),
}


def _prepare(case: str, random_series: Path, tmp_path: Path) -> tuple[list[str], Path]:
    """The case's folder as the run finds it, and its (argv, working folder)."""
    if "no-file-can-be-created" in case and not Path("/proc/self").is_dir():
        pytest.skip("needs /proc, a folder where no file can be created")
    if case == "series-name-the-store-cannot-keep":  # a folder name with a space (a copy: a link resolves)
        shutil.copytree(random_series, tmp_path / "my series")
    if case == "series-folder-named-in-unicode":
        shutil.copytree(random_series, tmp_path / "sériés")
    if case == "model-a-symlink-loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
    build, _ = CASES[case]
    argv = ["track", *map(str, build(tmp_path, Path(random_series))), "--device", "cpu"]
    return argv, Path("/proc") if case.startswith("reports-dir-dot") else tmp_path


# the environment of a user's run: no Prefect server named, no Hub
ENV = {"PREFECT_API_URL": None, "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_before_prefect_and_creates_nothing(case, random_series, tmp_path):
    argv, cwd = _prepare(case, random_series, tmp_path)
    before = _snapshot(tmp_path)
    r = invoke(argv, cwd=cwd, env=ENV)
    lines = [x for x in r.stderr.strip().splitlines() if not is_progress(x)]
    assert r.code == 2, r.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert lines[0].startswith("dormant track: error: ") and CASES[case][1] in lines[0], lines
    assert not r.prefect_started, "Prefect was started"
    assert _snapshot(tmp_path) == before, "a refused run created or changed files"


def test_every_bad_input_is_refused_before_prefect_is_imported(random_series, tmp_path):
    """CASES one after another in one fresh interpreter with a PREFECT_HOME of its own: none imports prefect, and
    the home stays absent."""
    runs, names = [], []
    for case in CASES:
        if "no-file-can-be-created" in case and not Path("/proc/self").is_dir():
            continue
        (tmp_path / case).mkdir()
        argv, cwd = _prepare(case, random_series, tmp_path / case)
        runs.append((argv, cwd, {**ENV, "PREFECT_HOME": str(tmp_path / "prefect-home")}))
        names.append(case)
    results = in_one_process(runs)
    assert {
        n: r.stderr for n, r in zip(names, results, strict=True) if r.code != 2 or CASES[n][1] not in r.stderr
    } == {}
    assert {n: sorted(r.imported) for n, r in zip(names, results, strict=True) if "prefect" in r.imported} == {}
    assert not (tmp_path / "prefect-home").exists(), "a Prefect server was started"


@pytest.mark.parametrize("name", [".", "-x", "CON"])
def test_a_series_name_that_is_hidden_an_option_or_a_device_is_refused_in_one_line(tmp_path, capsys, name):
    from flows.cli import main

    store = tmp_path / "store"
    try:  # refused as the line is parsed (argparse's exit), before the request is built
        code = main(["track", "--model", str(tmp_path), "--store", str(store), f"--series-name={name}", "--no-report"])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--series-name" in err[0] and "no device name" in err[0]
    assert not store.exists()


@pytest.mark.parametrize(
    "variable, argv, needle",
    [
        ("DORMANT_STORE", ["status"], "DORMANT_STORE={file} (the default of --store) is a file"),
        ("DORMANT_REPORTS", ["report", "--store", "{store}"], "DORMANT_REPORTS={file} (where reports go without"),
    ],
)
def test_a_variable_set_to_a_file_is_named_as_the_variable(variable, argv, needle, tmp_path, capsys, monkeypatch):
    """Before: DORMANT_STORE set to a file was reported as `--store`, which the user had not typed; DORMANT_REPORTS
    set to a file got "File exists: free space, fix the permissions"."""
    from flows.cli import main
    from tests.builders.stores import TOKENS, known_picture, write_series

    store = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.setenv(variable, str(tmp_path / "a-file"))
    fill = {"file": tmp_path / "a-file", "store": store}
    assert main([a.format(**fill) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle.format(**fill) in err[0] and f"set {variable} to a" in err[0], err


def test_a_store_a_first_track_is_making_says_so(tmp_path, capsys):
    """While a first `track` has taken its lock but stored nothing, the store has no marker: `status` said "not a
    dormant store". The running writer is this test's own process, named in the lock's pid file as
    `store.hold_series` names its holder (a real second run would take minutes here)."""
    from flows.cli import main

    locks = tmp_path / "store" / "_locks"
    locks.mkdir(parents=True)
    (locks / "tiny.pid").write_text(f"{os.getpid()}\n")
    assert main(["status", "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"is being made by a track run (pid {os.getpid()})" in err and "not a dormant store" not in err, err
