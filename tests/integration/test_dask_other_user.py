"""Dask workers as another user, as on another host: a real `dask scheduler` and two `dask worker`s run by a system
user who can read the checkpoints but neither read nor write the store's folder (mode 700, root's), each with a
HOME and caches of its own and nothing of the flow's environment. `dormant track --runner dask --address` (its own
temporary Prefect server) stores every checkpoint: the workers compute, report to the flow's Prefect API, and
return rows; the flow alone writes."""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from dormant_tasks.store.io import read_table
from tests.builders.processes import REPO, cli_env, run_cli

USER = "dormant-dask-worker"


@pytest.fixture(scope="session")
def other_user():
    """A system user of this machine (created here, removed afterwards): the workers' account."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the test creates a system user for the workers (useradd)")
    if not shutil.which("useradd"):
        pytest.skip("needs useradd to create the workers' user")
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv (util-linux) to start the workers as that user")
    created = False
    try:
        pwd.getpwnam(USER)
    except KeyError:
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], capture_output=True
        )
        created = made.returncode == 0  # else another test process made it a moment ago
    user = pwd.getpwnam(USER)
    yield user
    if created:
        subprocess.run(["userdel", USER], capture_output=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _closed_ancestor(path: Path) -> tuple[Path, Path] | None:
    """(the first folder above `path` that others cannot enter, its child on the way to `path`), or None."""
    parts = path.resolve().parts
    for i in range(1, len(parts) - 1):
        folder = Path(*parts[: i + 1])
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder, folder / parts[i + 1]
    return None


def _as_user(user, argv: list[str], env: dict[str, str], scratch: Path) -> list[str]:
    """`argv` run as `user`, with no supplementary group. Where this interpreter lies in a folder others cannot
    enter (pyenv under /root here), the command gets a mount namespace of its own in which that folder is an
    empty tmpfs that others may enter, holding only the interpreter's folder: the user reaches Python and still
    nothing of the store."""
    drop = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "env", "-i"]
    command = [*drop, *(f"{k}={v}" for k, v in env.items()), *argv]
    closed = _closed_ancestor(Path(sys.base_prefix))
    if closed is None:
        return command
    if not shutil.which("unshare"):
        pytest.skip(f"{closed[0]} is closed to other users and there is no `unshare` to open the interpreter's path")
    folder, child = closed
    keep = scratch / "interpreter"
    keep.mkdir()
    steps = [
        f"mount --bind {shlex.quote(str(child))} {shlex.quote(str(keep))}",
        f"mount -t tmpfs -o mode=755 none {shlex.quote(str(folder))}",
        f"mkdir {shlex.quote(str(child))}",
        f"mount --bind {shlex.quote(str(keep))} {shlex.quote(str(child))}",
        "exec " + shlex.join(command),
    ]
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", " && ".join(steps)]


def _readable_copy(series: Path) -> Path:
    """The series in a folder every user may read (pytest's own folders are root's, mode 700)."""
    root = Path(tempfile.mkdtemp(prefix="dormant-shared-series-"))
    root.chmod(0o755)
    copy = Path(shutil.copytree(series, root / series.name))
    for p in [copy, *copy.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return copy


@contextlib.contextmanager
def _cluster(user, tmp_path: Path, n_workers: int = 2):
    """A `dask scheduler` on loopback (root's) and `n_workers` `dask worker`s as `user`: (address, worker pids)."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    python = sys.executable
    processes: list[subprocess.Popen] = []
    homes: list[Path] = []
    scheduler = [python, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port)]
    processes.append(
        subprocess.Popen(
            [*scheduler, "--no-dashboard"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    )
    try:
        for i in range(n_workers):
            home = Path(tempfile.mkdtemp(prefix=f"dormant-worker-{i}-"))  # the worker's own: HOME, caches, space
            os.chown(home, user.pw_uid, user.pw_gid)
            homes.append(home)
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": str(home),
                "HF_HOME": str(home / "hf"),
                "DORMANT_CACHE_DIR": str(home / "dormant"),
                "PYTHONPATH": str(REPO),
                "HF_HUB_OFFLINE": "1",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "TOKENIZERS_PARALLELISM": "false",
            }
            argv = [python, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard"]
            argv += ["--name", f"other-{i}", "--local-directory", str(home / "dask")]
            scratch = tmp_path / f"worker-{i}"
            scratch.mkdir()
            with open(scratch / "log", "wb") as log:
                processes.append(
                    subprocess.Popen(
                        _as_user(user, argv, env, scratch),
                        cwd=home,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        yield address, [p.pid for p in processes[1:]]
    finally:
        for p in reversed(processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 15)
        for p in processes:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait(10)
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)


def _workers_ready(address: str, n: int, store_folder: Path, series: Path) -> dict:
    """What each worker sees: its user, the store's folder (closed to it), the checkpoints (open)."""
    from distributed import Client

    def probe(store_folder=str(store_folder), series=str(series)):
        import os

        try:
            os.listdir(store_folder)
            store = "readable"
        except PermissionError:
            store = "closed"
        return os.getuid(), store, os.access(store_folder, os.W_OK), sorted(os.listdir(series)), os.environ["HOME"]

    with Client(address, timeout=30, set_as_default=False) as client:
        client.wait_for_workers(n, timeout=120)
        return client.run(probe)


def _servers_below(pids: list[int]) -> list[str]:
    """Prefect API servers (uvicorn) among the processes under the workers."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    line = " ".join(p.cmdline())
                    if "uvicorn" in line or "prefect server" in line:
                        out.append(line[:200])
    return out


@pytest.mark.slow
def test_workers_of_another_user_who_cannot_see_the_store_fill_it(other_user, random_series, tmp_path, prefect_api_url):
    series = _readable_copy(random_series)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    store = private / "store"
    try:
        with _cluster(other_user, tmp_path) as (address, worker_pids):
            seen = _workers_ready(address, 2, private, series)
            assert len(seen) == 2, seen
            names = sorted(p.name for p in series.iterdir())
            for uid, store_access, writable, listed, _home in seen.values():
                assert (uid, store_access, writable, listed) == (other_user.pw_uid, "closed", False, names), seen
            assert len({home for *_, home in seen.values()}) == 2, seen  # each worker its own HOME
            args = ["track", "--model", series, "--store", store, "--runner", "dask", "--address", address]
            t0 = time.monotonic()
            r, _ = run_cli(
                [*args, "--scores", "ahon_ln,awft", "--no-report"],
                cli_env(PREFECT_API_URL=prefect_api_url),  # the session's server: the workers report to it
                tmp_path,
                timeout=420,
            )
            seconds = time.monotonic() - t0
            servers = _servers_below(worker_pids)
        stored = read_table(store, "checkpoints").column("revision").to_pylist()
        print(f"other-user run: {seconds:.1f} s, {len(stored)} checkpoints stored")
        assert r.returncode == 0, r.stderr[-3000:]
        assert sorted(stored) == names, stored
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        assert not servers, f"a worker started a Prefect server: {servers}"
    finally:
        shutil.rmtree(series.parent, ignore_errors=True)
