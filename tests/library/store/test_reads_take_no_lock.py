"""Reading a store takes no lock and needs no POSIX-only module: a real tracked store read through the Python API
and `read_table` in a child process where `import fcntl` fails (as on Windows), while another process holds the
series' write lock; the read waits for nothing and changes no file of the store."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dormant_tasks.tracking.request import TrackRequest
from tests.builders.track import track_steps

REPO = Path(__file__).resolve().parents[3]
# What the store's locks used to import. Others (termios, tty) third-party modules import by `sys.platform`, which
# a child process here cannot fake; fcntl is the one a module imported whatever the platform.
POSIX_ONLY = ("fcntl",)

READ = textwrap.dedent(
    """
    import sys
    for name in {posix_only!r}:
        sys.modules[name] = None  # `import name` raises ImportError, as on Windows
    import dormant_tasks
    from dormant_tasks.store import lock, read_table

    def no_lock(*a, **k):
        raise AssertionError("a read took the series lock")

    lock._file_lock = no_lock  # every lock of a series file goes through it

    store = dormant_tasks.open_store(sys.argv[1])
    series = store[sys.argv[2]]
    checkpoints, masks = series.checkpoints(), series.masks("ahon_ln")
    transitions, taus = series.transitions(), series.taus()
    heads = read_table(sys.argv[1], "head_scores", model_id=sys.argv[2])
    loaded = sorted(m for m in {posix_only!r} if sys.modules.get(m) is not None)
    print(len(checkpoints), masks.shape[0], len(taus), heads.num_rows, len(transitions) >= 0, loaded)
    """
).format(posix_only=POSIX_ONLY)

HOLD = textwrap.dedent(
    """
    import sys, time
    from dormant_tasks.store import hold_series

    with hold_series(sys.argv[1], sys.argv[2]):
        print("held", flush=True)
        time.sleep(600)
    """
)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def _read(store: Path, model_id: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", READ, str(store), model_id], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def tracked(random_series, tmp_path_factory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("readers") / "store"
    request = TrackRequest(source=str(random_series), store=str(store), limit=4, score_fns=("ahon_ln",), report=False)
    track_steps(request)
    return store, request.model_id


def test_a_read_imports_no_posix_only_module_and_takes_no_lock(tracked):
    store, model_id = tracked
    shutil.rmtree(store / "_locks", ignore_errors=True)  # as a store copied to another machine: no lock file
    before = _snapshot(store)
    assert _read(store, model_id) == "3 3 1 24 True []"  # checkpoints, masks, taus, heads (3 x 2 x 4); loaded
    assert _snapshot(store) == before  # no lock file, no lock folder, nothing touched


def test_a_read_does_not_wait_for_the_series_writer(tracked):
    store, model_id = tracked
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(store), model_id], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _snapshot(store)
        assert (store / "_locks").is_dir()  # the writer's lock is there, and held
        assert _read(store, model_id) == "3 3 1 24 True []"  # a reader that waited would time out (120 s)
        assert _snapshot(store) == before
    finally:
        holder.kill()
        holder.wait(30)
