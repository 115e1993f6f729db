"""`dormant` run in this process, as click's `CliRunner` runs a command: `invoke(argv, cwd=..., env=...)` calls
`flows.cli.main(argv)` with stdout and stderr captured (Prefect's console handlers included) and gives back the
exit code, both outputs and whether the run started Prefect. Whatever a run changes in the process is put back
afterwards: the working folder, the environment, sys.argv, the signal handlers, the console filters and the
per-command state of `flows.session`. A run costs milliseconds where a `dormant` process costs 3-4 s (the
interpreter and its imports); a test keeps a real process only for what a process is needed for (signals, the
UTF-8 re-exec, the installed entry point), and `in_one_process` checks import weight for many runs in one process.

Light on purpose: importing this module imports no heavy library (`in_one_process` imports it in a fresh process).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "transformers", "pyarrow", "prefect", "numpy", "matplotlib", "huggingface_hub"}


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    prefect_started: bool = False  # the run called `flows.session.start_prefect` (a flow ran, or was about to)
    imported: set[str] = field(default_factory=set)  # top-level packages it imported (from `in_one_process` only)

    @property
    def lines(self) -> list[str]:
        """stderr's lines, blank ones and a library's progress bar left out (transformers' "Loading weights:
        100%|###|": in-process, tqdm was imported before `main` could set TQDM_DISABLE for a pipe, as a `dormant`
        process does)."""
        return [line for line in self.stderr.splitlines() if line.strip() and not re.search(r"\d+%\|", line)]


class _Capture(io.StringIO):
    """A pipe's stand-in: not a terminal, as under a test runner or in a log file."""

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None] | None) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = str(value)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _console_to(out: io.StringIO, err: io.StringIO, verbose: bool) -> Iterator[None]:
    """sys.stdout and sys.stderr to the captures, and Prefect's console handlers as a `dormant` process on a pipe
    configures them: their stream `err`, their level WARNING (INFO with --verbose or --debug), their records plain
    `LEVEL: message` lines. A process gets that from the variables `main` sets before Prefect is imported
    (`flows.session.configure_console`, `flows.cli.plain_diagnostics`); in this process Prefect read them long ago."""
    handlers = []
    if "prefect" in sys.modules:  # not imported by this run's parsing: a handler made later is made on `err`
        from flows.prefect_adapter import console_handlers

        handlers = [(h, h.stream, h.console.file, list(h.filters), h.level, h.formatter) for h in console_handlers()]
    for h, *_ in handlers:
        h.stream = h.console.file = err
        h.setLevel(logging.INFO if verbose else logging.WARNING)
        if not verbose:
            h.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    finally:
        for h, stream, file, filters, level, formatter in handlers:
            h.stream, h.console.file, h.filters = stream, file, filters
            h.setLevel(level)
            h.setFormatter(formatter)


def _reset_session() -> bool:
    """`flows.session`'s per-command state back to a fresh process's (a run stops its own server); whether the run
    had started Prefect."""
    session = sys.modules.get("flows.session")
    if session is None:
        return False
    started = session._started
    session._started = session._stopping = session._show_library_output = False
    session._server = session._server_output = None
    if "prefect" in sys.modules:
        from flows.prefect_adapter import console_handlers

        for h in console_handlers():
            h.filters = [f for f in h.filters if not isinstance(f, session._ExpectedFailureFilter)]
    return started


def invoke(
    argv: Sequence[object], *, cwd: str | Path | None = None, env: Mapping[str, str | None] | None = None
) -> Result:
    """`dormant ARGV` in this process, in `cwd`, with `env`'s changes to the environment (None: unset). An
    argparse exit is its code; an exception that escapes `main` is exit 1 with its traceback on stderr, as the
    interpreter would print it."""
    from flows.cli import main

    out, err = _Capture(), _Capture()
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    args = [str(a) for a in argv]
    _reset_session()
    try:
        verbose = "--verbose" in args or "--debug" in args
        with _environment(env), _console_to(out, err, verbose):
            sys.argv = ["dormant", *args]
            if cwd is not None:
                os.chdir(cwd)
            try:
                code = main(args)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, int | None):
                    print(e.code, file=sys.stderr)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        for s, handler in saved_signals.items():
            signal.signal(s, handler)
        started = _reset_session()
    return Result(code, out.getvalue(), err.getvalue(), started)


_DRIVER = """
import json, sys
from tests.builders.cli import invoke
for argv, cwd, env in json.loads(sys.stdin.read()):
    before = {name.split(".")[0] for name in sys.modules}
    r = invoke(argv, cwd=cwd, env=env)
    imported = sorted({name.split(".")[0] for name in sys.modules} - before)
    print(json.dumps([r.code, r.stdout, r.stderr, r.prefect_started, imported]), flush=True)
"""


def in_one_process(
    runs: Sequence[tuple[Sequence[object], str | Path | None, Mapping[str, str | None] | None]], timeout: float = 300
) -> list[Result]:
    """Each (argv, cwd, env) run through `invoke`, one after another, in ONE fresh interpreter: each Result's
    `imported` holds the top-level packages that run imported first. A run that imports nothing heavy leaves the
    next one as clean as a fresh process, so a heavy import is caught at the first run that makes it."""
    payload = json.dumps(
        [[[str(a) for a in argv], str(cwd) if cwd else None, dict(env or {})] for argv, cwd, env in runs]
    )
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER],
        input=payload,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = []
    for line in proc.stdout.splitlines():
        code, stdout, stderr, started, imported = json.loads(line)
        results.append(Result(code, stdout, stderr, started, set(imported)))
    assert len(results) == len(runs), proc.stderr[-3000:]
    return results
