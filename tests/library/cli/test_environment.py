"""An environment that cannot run Prefect is one line naming the variable and the fix, exit 2, in seconds, before
Prefect starts (`preflight.check_environment`); Ctrl-C before the command starts is one line, exit 130.

Unchecked, an unwritable PREFECT_HOME (or HOME) waited 190 s for a temporary server that cannot start and printed
85 lines; a full TMPDIR filled the run's console with the server's HTTP 500s. As root (CI, this machine) a
read-only folder still takes files, so "takes no file" is made here by a path under a regular file and by a full
tmpfs (mounted when the test may mount one, else that case is skipped)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.builders.cli import invoke
from tests.builders.processes import cli_env, run_cli
from tests.builders.progress import is_progress

REPO = Path(__file__).resolve().parents[3]


def _run(argv, tmp_path, **env_changes) -> tuple[subprocess.CompletedProcess, float]:
    """A real `dormant` process: for what only a fresh interpreter shows (its locale, its start)."""
    env = cli_env(PREFECT_HOME=str(tmp_path / "prefect-home"))
    env.pop("TMPDIR", None)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return run_cli(argv, env, tmp_path, timeout=120)


def _full_tmpfs(tmp_path: Path) -> Path:
    """A 64 KiB tmpfs filled to the last byte; skips the test where no tmpfs can be mounted (not root, a
    container without CAP_SYS_ADMIN)."""
    mount = tmp_path / "full"
    mount.mkdir()
    r = shutil.which("mount") and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if not r or r.returncode != 0:
        pytest.skip("no tmpfs can be mounted here: the full-disk case needs one")
    try:
        with open(mount / "fill", "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)
    except OSError:  # full: what was wanted
        return mount
    except BaseException:
        subprocess.run(["umount", str(mount)], check=False)
        raise


CASES = {
    "prefect-home-under-a-file": ({"PREFECT_HOME": "{file}/prefect"}, "PREFECT_HOME {file}/prefect"),
    "home-under-a-file": ({"PREFECT_HOME": None, "HOME": "{file}/home"}, "HOME {file}/home"),
    "tmpdir-missing": ({"TMPDIR": "{tmp}/no-such-tmp"}, "TMPDIR {tmp}/no-such-tmp"),
    "tmpdir-full": ({"TMPDIR": "{full}"}, "TMPDIR {full} takes no file (No space left on device)"),
    "prefect-home-full": ({"PREFECT_HOME": "{full}/prefect"}, "PREFECT_HOME {full}/prefect"),
    # Prefect makes its home folder but not that folder's parents: unchecked, its server retried for minutes
    "home-missing": ({"PREFECT_HOME": None, "HOME": "{tmp}/no-such-home"}, "HOME {tmp}/no-such-home does not exist"),
    "prefect-home-parent-missing": ({"PREFECT_HOME": "{tmp}/no-such/x"}, "PREFECT_HOME {tmp}/no-such/x"),
    "hf-home-under-a-file": ({"HF_HOME": "{file}/hf"}, "HF_HOME {file}/hf"),
    "xdg-cache-home-under-a-file": ({"XDG_CACHE_HOME": "{file}/cache"}, "XDG_CACHE_HOME {file}/cache"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_environment_prefect_cannot_run_in_is_one_line_exit_2_within_10_s(case, random_series, tmp_path):
    """In-process (tests/builders/cli.py): the environment as a user's shell would give it, its changes undone after."""
    changes, needle = CASES[case]
    (tmp_path / "a-file").write_text("not a folder\n")
    full = _full_tmpfs(tmp_path) if "full" in case else None
    fill = {"file": tmp_path / "a-file", "tmp": tmp_path, "full": full}
    env = {
        "PREFECT_API_URL": None,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "TMPDIR": None,
        "HF_HUB_OFFLINE": "1",
    }
    env.update({k: (v.format(**fill) if v else v) for k, v in changes.items()})
    try:
        started = time.perf_counter()
        r = invoke(
            ["track", "--model", random_series, "--store", tmp_path / "store", "--device", "cpu"], cwd=tmp_path, env=env
        )
        seconds = time.perf_counter() - started
    finally:
        if full is not None:
            subprocess.run(["umount", str(full)], check=False)
    lines = [x for x in r.stderr.strip().splitlines() if not is_progress(x)]
    assert r.code == 2, r.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert lines[0].startswith("dormant track: error: ") and needle.format(**fill) in lines[0], lines
    assert "writable folder" in lines[0], lines  # the fix
    assert seconds < 10, f"{seconds:.1f} s"
    assert not r.prefect_started, "Prefect was started"
    assert not (tmp_path / "store").exists(), "the refused run created the store"


@pytest.mark.parametrize(
    "variable, value",
    [("HOME", "{tmp}/no-such-home"), ("PREFECT_HOME", "{tmp}/no-such/x"), ("HF_HOME", "{file}/hf")],
)
def test_the_environment_check_answers_in_under_a_second_without_prefect(variable, value, tmp_path, monkeypatch):
    """The check itself (a few stat calls and one probe file), timed in-process: the subprocess test's 10 s
    allow for the interpreter's start on a loaded machine. Prefect is not imported by it."""
    from dormant_tasks.errors import ConfigError
    from flows.cli.preflight import check_environment

    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    monkeypatch.setenv(variable, value.format(tmp=tmp_path, file=tmp_path / "a-file"))
    imported_before = "prefect" in sys.modules
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=variable):
        check_environment("track")
    assert time.perf_counter() - start < 1.0
    assert imported_before or "prefect" not in sys.modules


def test_the_same_environment_does_not_block_a_command_without_prefect(tmp_path):
    r = invoke(
        ["status", "--store", tmp_path / "store"],
        cwd=tmp_path,
        env={"PREFECT_HOME": str(tmp_path / "f" / "x"), "TMPDIR": str(tmp_path / "no-such-tmp")},
    )
    assert r.code == 2 and "does not exist" in r.stderr, r.stderr  # the store's own refusal, not the environment's
    assert "PREFECT_HOME" not in r.stderr and "TMPDIR" not in r.stderr, r.stderr


def test_ctrl_c_while_the_command_line_is_read_is_one_line_exit_130(tmp_path):
    """The interrupt lands deterministically inside `main`, before the boundary takes over (where a Ctrl-C in
    the first 0.2 s landed: inside an import), by sending it from the first thing `main` calls."""
    code = (
        "import os, signal, sys\n"
        "sys.argv = ['dormant', 'status', '--store', 'nowhere']\n"
        "import flows.cli as cli\n"
        "first = cli.no_stdin\n"
        "def interrupted_here():\n"
        "    first()\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    signal.sigtimedwait([], 0) if hasattr(signal, 'sigtimedwait') else None\n"
        "cli.no_stdin = interrupted_here\n"
        "cli.main()\n"
        "print('the interrupt was lost')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 130, r.stderr
    assert lines == ["dormant: interrupted before the command started; nothing was done"], r.stderr
    assert "the interrupt was lost" not in r.stdout


def test_a_non_ascii_store_path_under_the_c_locale_reads_and_says_its_path(tmp_path):
    """`LC_ALL=C PYTHONCOERCECLOCALE=0` (and UTF-8 mode off): Python decoded the path into surrogates, and pyarrow's
    first read of the store raised UnicodeEncodeError (a traceback). Now the program restarts in UTF-8 mode
    (`flows.cli.utf8_everywhere`): the store reads, and a message names the path as typed."""
    from tests.builders.stores import TOKENS, known_picture, write_series

    store = write_series(tmp_path / "störe", {"ahon_ln": known_picture()}, TOKENS)
    c_locale = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    for command in (["status", "--store", store], ["findings", "--store", store]):
        r, _ = _run(command, tmp_path, **c_locale)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
        assert "test-org/tiny-series" in r.stdout, r.stdout
    r, _ = _run(["status", "--store", tmp_path / "nö"], tmp_path, **c_locale)
    assert r.returncode == 2 and f"--store {tmp_path / 'nö'} does not exist" in r.stderr, r.stderr
