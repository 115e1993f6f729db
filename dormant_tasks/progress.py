"""Progress of long steps (pretraining, scoring, checkpoints of a track run, sweeps): a bar on a terminal, plain
lines on a pipe or a file.

`progress_bar(...)` returns tqdm when stderr is a terminal. Otherwise (`make demo > log`, CI, `| cat`) it returns
a `LogProgress`, which prints one plain line on stderr when the step starts, then at least every `EVERY_S`
seconds while it runs, and one when it ends: a heartbeat thread looks every second, so a line comes even while
one item blocks (a download, a long batch). Results stay on stdout; these lines are diagnostics.

`LogProgress` takes its clock and its stream as arguments: tests drive it with a fake clock and call `tick()`
themselves (`heartbeat=False`), without sleeping.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import IO, Any

EVERY_S = 20.0  # seconds between two lines at most (plus the heartbeat's 1 s): under 30 s of silence
HEARTBEAT_S = 1.0


class LogProgress:
    """A tqdm-like progress report as plain lines: `update(n)`, `set_postfix(...)`, `close()`, iteration."""

    def __init__(
        self,
        iterable: Iterable | None = None,
        *,
        total: int | None = None,
        initial: int = 0,
        desc: str = "",
        unit: str = "it",
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        every: float = EVERY_S,
        heartbeat: bool = True,
        quiet_start: bool = False,
        first_after: float | None = None,
    ):
        if total is None and isinstance(iterable, Sized):
            total = len(iterable)
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.n = initial
        self._initial = initial  # done before this run (stored): not counted in its rate
        self.postfix = ""
        self._stream = stream
        self._clock, self._every = clock, every
        self._first = every if first_after is None else first_after  # quiet start: the first line after this
        self._start = self._last = clock()
        self._lock = threading.Lock()
        self._closed = False
        self._printed = False
        if not quiet_start:  # quiet: the first line once the step has lasted `every` (a quick one prints nothing)
            self._line("started")
        self._stop = threading.Event()
        self._thread = None
        if heartbeat:
            self._thread = threading.Thread(target=self._beat, name=f"progress-{desc}", daemon=True)
            self._thread.start()

    def __iter__(self) -> Iterator:
        if self.iterable is None:
            raise TypeError("this progress line was made without an iterable; call update() instead")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.n += n
        self.tick()

    def set_postfix(self, **kw: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in kw.items())

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s

    def tick(self) -> bool:
        """Print a line when the last one is `every` seconds old; True when it printed."""
        with self._lock:
            if self._closed or self._clock() - self._last < (self._every if self._printed else self._first):
                return False
            self._line()
            return True

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._printed:
                self._line("done" if self.total is None or self.n >= self.total else "stopped")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.tick()

    def _line(self, note: str = "") -> None:
        now = self._clock()
        elapsed = now - self._start
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        parts = [f"{count} {self.unit}"] if self.total is not None or self.n else []  # `waiting`: time only
        parts.append(f"{_duration(elapsed)} elapsed")
        if not note and self.total and self._initial < self.n < self.total:
            rate = elapsed / (self.n - self._initial)  # seconds per item of this run
            parts.append(f"about {_duration(rate * (self.total - self.n))} left")
        if self.postfix:
            parts.append(self.postfix)
        stream = self._stream or sys.stderr  # looked up now: pytest's capture may swap sys.stderr
        stream.write(f"{self.desc}: {', '.join(parts)}{' (' + note + ')' if note else ''}\n")
        stream.flush()
        self._last = now
        self._printed = True

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Off:
    """A disabled report: every call does nothing; iterating yields the items."""

    def __init__(self, iterable=None):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def update(self, n: int = 1) -> None: ...

    def set_postfix(self, **kw) -> None: ...

    def set_postfix_str(self, s: str) -> None: ...

    def close(self) -> None: ...


def on_terminal(stream: IO[str] | None = None) -> bool:
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def progress_bar(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    initial: int = 0,
    desc: str,
    unit: str,
    enabled: bool = True,
):
    """tqdm on a terminal, `LogProgress` lines on a pipe or file, nothing when not `enabled`."""
    if not enabled:
        return _Off(iterable)
    if on_terminal():
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, initial=initial, desc=desc, unit=unit)
    return LogProgress(iterable, total=total, initial=initial, desc=desc, unit=unit)


@contextlib.contextmanager
def waiting(desc: str) -> Iterator[None]:
    """One blocking step without a count (a download): on a pipe or file a line every EVERY_S seconds while it
    runs and one when it ends, none for a step shorter than that (a quick failure stays one error line); on a
    terminal nothing (the step shows its own bar)."""
    if on_terminal():
        yield
        return
    with LogProgress(desc=desc, unit="", quiet_start=True, every=EVERY_S):  # EVERY_S read now: tests shorten it
        yield


@contextlib.contextmanager
def early(desc: str, first_after: float = 1.0) -> Iterator[None]:
    """A step that may be long before anything else prints (listing a series, hashing its checkpoints): a line
    once it has lasted `first_after` seconds, then every EVERY_S, on a terminal too; a quick step (or a quick
    failure, which stays one error line) prints nothing."""
    with LogProgress(desc=desc, unit="", quiet_start=True, first_after=first_after):
        yield


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    m, s = divmod(seconds, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


# ------------------------------------------------------------------------------------------ a command's first line

# A command that has printed nothing for this long says what it is doing. The test suite sets it far off
# (DORMANT_TEST_FIRST_LINE_S, tests/conftest.py) for the commands whose whole output its tests compare, and back
# to this in the tests of the line itself.
FIRST_LINE_S = 1.0


class FirstLine:
    """A command's first line when it is slow to print one: while nothing else has been written, a line on `stream`
    once the command has lasted `first_after` seconds (counted from `started`), then every `every`, naming what it
    is doing (`phase`); the first write of anything else ends it without a further line (`done`). Whatever the
    command waits for before its own first line (torch's import, the temporary Prefect server, the store's lock),
    the user sees a line within about `first_after` s."""

    def __init__(
        self,
        command: str,
        stream: IO[str],
        *,
        started: float,
        first_after: float = FIRST_LINE_S,
        every: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
    ):
        self.command, self._stream, self._started, self._clock = command, stream, started, clock
        self._next = started + first_after
        self._every = every
        self.phase = "starting (loading its libraries)"
        self._done = threading.Event()
        self._lock = threading.Lock()
        if heartbeat:
            threading.Thread(target=self._beat, name="first-line", daemon=True).start()

    def done(self) -> None:
        self._done.set()

    def tick(self) -> bool:
        """Print the line when it is due and nothing else was written; True when it printed."""
        with self._lock:
            now = self._clock()
            if self._done.is_set() or now < self._next:
                return False
            self._stream.write(f"dormant {self.command}: {self.phase}: {_duration(now - self._started)} elapsed\n")
            self._stream.flush()
            self._next = now + self._every
            return True

    def _beat(self) -> None:
        while not self._done.wait(min(HEARTBEAT_S, max(0.05, self._next - self._clock()))):
            self.tick()


class _Watched:
    """A text stream that calls `on_write` once, at its first write, and otherwise is the stream it wraps."""

    def __init__(self, stream: IO[str], on_write: Callable[[], None]):
        self._wrapped, self._on_write = stream, on_write

    def write(self, text: str) -> int:
        if text:
            self._on_write()
        return self._wrapped.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


@contextlib.contextmanager
def first_line(command: str, started: float) -> Iterator[FirstLine]:
    """For a command run as a program, around its run: its first line when it is slow to print one (`FirstLine`), on
    stderr. Its stdout and stderr are watched inside (the stdlib's `redirect_stdout`/`redirect_stderr`): the first
    write to either ends the wait, and so does the block's end."""
    after = float(os.environ.get("DORMANT_TEST_FIRST_LINE_S") or FIRST_LINE_S)
    line = FirstLine(command, sys.stderr, started=started, first_after=after)
    try:
        with (
            contextlib.redirect_stdout(_Watched(sys.stdout, line.done)),  # type: ignore[type-var]
            contextlib.redirect_stderr(_Watched(sys.stderr, line.done)),  # type: ignore[type-var]
        ):
            yield line
    finally:
        line.done()
