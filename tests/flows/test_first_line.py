"""Issue 62, item 5: a command says something within about a second, whatever it waits for before its own first
line (imports, the temporary Prefect server, the store), and the times it reports are the wall times waited.

A `sitecustomize` hook makes the command slow before its first line of output: the first import of `flows.session`
(which `main` imports right after it starts) sleeps SLOW_S seconds."""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import time

import pytest

from tests.builders.processes import cli_env

pytestmark = pytest.mark.slow
SLOW_S = 4.0
HOOK = f"""\
import sys, time


class SlowStart:
    def find_spec(self, name, path=None, target=None):
        if name == "flows.session":
            sys.meta_path.remove(self)
            time.sleep({SLOW_S})
        return None


sys.meta_path.insert(0, SlowStart())
"""


def _slow_env(tmp_path, **extra) -> dict:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK, encoding="utf-8")
    env = cli_env(hook, **extra)
    env.pop("DORMANT_TEST_FIRST_LINE_S", None)  # the line's own default (tests/conftest.py sets it far off)
    return env


def _timed_lines(args, env, cwd, timeout=600) -> tuple[list[tuple[float, str]], int]:
    """[(seconds since start, line)] of the command's stdout and stderr as they come, and its exit code."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *map(str, args)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines, partial = [], {proc.stdout: b"", proc.stderr: b""}
    sel = selectors.DefaultSelector()
    for stream in partial:
        sel.register(stream, selectors.EVENT_READ)
    while sel.get_map():
        assert time.monotonic() - start < timeout, lines
        for key, _ in sel.select(timeout=1):
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                sel.unregister(key.fileobj)
                continue
            *done, partial[key.fileobj] = (partial[key.fileobj] + data).split(b"\n")
            lines += [(time.monotonic() - start, d.decode(errors="replace")) for d in done]
    return lines, proc.wait()


def test_a_command_slow_to_start_says_so_within_two_seconds(tmp_path, random_series):
    lines, code = _timed_lines(["checkpoints", "--model", random_series], _slow_env(tmp_path), tmp_path)
    assert code == 0, lines
    (at, first), *rest = lines
    assert first.startswith("dormant checkpoints: starting") and first.endswith("elapsed"), lines
    assert at < SLOW_S, f"the first line came after {at:.1f} s, once the slow start was over: {lines}"
    assert rest and not any("starting" in line for _, line in rest)  # once: the command's own output ends it


def test_a_finished_demo_reports_the_time_the_user_waited(tmp_path, demo_run):
    """A second `make demo` was silent 35-40 s and then said "complete (4 s)": its clock started after the
    libraries were loaded. The time it reports now counts from the command's start."""
    folder = demo_run.folder  # make demo's layout, read only: a finished demo answers from its store
    args = ["demo", "--reports-dir", tmp_path / "reports"]  # the report elsewhere
    start = time.monotonic()
    lines, code = _timed_lines(args, _slow_env(tmp_path), folder)
    waited = time.monotonic() - start
    assert code == 0, lines
    assert lines[0][1].startswith("dormant demo: starting") and lines[0][0] < SLOW_S, lines
    (said,) = [int(m[1]) for _, line in lines if (m := re.search(r"complete \((\d+) s\)", line))]
    assert SLOW_S <= said + 0.5 and said <= waited + 0.5, (said, waited, lines)


def test_the_checkpoints_counter_counts_from_zero_and_names_what_was_done_before(
    tmp_path, random_series, prefect_api_url
):
    """It began at "1/3 ckpt (started)" (the taus' checkpoint counted as this loop's), a rerun at "2/6 ...": it
    counts what is left to score, from 0, and names the checkpoints done before."""
    env = cli_env(PREFECT_API_URL=prefect_api_url)
    lines, code = _timed_lines(
        ["track", "--model", random_series, "--store", tmp_path / "s", "--no-report"], env, tmp_path
    )
    assert code == 0, lines
    counter = [line for _, line in lines if line.startswith("checkpoints to score")]
    assert counter[0] == "checkpoints to score (1 of 3 already done): 0/2 ckpt, 0s elapsed (started)", lines
    assert counter[-1].startswith("checkpoints to score (1 of 3 already done): 2/2 ckpt") and "(done)" in counter[-1]
