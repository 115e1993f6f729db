"""The persistent per-file sha256 cache (dormant_tasks/checkpoints/hash_cache.py) behind `file_sha256` and `local_content_hash`.

Oracle: hashlib over the file's bytes. Reuse across processes is shown by a subprocess whose hashing function
raises: it can only answer from the database. Works as root (no chmod tricks)."""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from fnmatch import fnmatch
from pathlib import Path

import pytest

from dormant_tasks.checkpoints import hash_cache, hub
from dormant_tasks.checkpoints.hub import file_sha256
from dormant_tasks.checkpoints.loading import _content_hash, local_content_hash

REPO = Path(__file__).resolve().parents[3]
PAST = time.time() - 3600  # well outside hash_cache.RACY_S: such a file's hash is stored


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """A fresh cache dir per test, and `_content_hash`'s in-process lru emptied so every call reaches file_sha256."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DORMANT_CACHE_DIR", str(cache))
    _content_hash.cache_clear()
    yield cache
    _content_hash.cache_clear()


@pytest.fixture
def reads(monkeypatch):
    """Paths actually read by file_sha256 (the cache's misses), in order."""
    seen: list[Path] = []
    uncached = hub.sha256_file

    def counting(path):
        seen.append(Path(path))
        return uncached(path)

    monkeypatch.setattr(hub, "sha256_file", counting)
    return seen


def write(path: Path, data: bytes, mtime: float = PAST) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


def oracle_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def oracle_content_hash(folder: Path) -> str:
    """The definition of a local checkpoint's commit, as stored since before the cache existed."""
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and hub.is_loading_file(p.name)]
    if not any(p.name.endswith(".safetensors") for p in files):  # then transformers loads the pickled weights
        pickled = ("*.bin", "*.pt", "*.pth", "*.index.json")
        files = sorted(
            files + [p for p in folder.iterdir() if p.is_file() and any(fnmatch(p.name, g) for g in pickled)]
        )
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.name}\0{oracle_sha256(p)}\n".encode())
    return h.hexdigest()


def checkpoint(folder: Path, weights: bytes) -> Path:
    write(folder / "config.json", b'{"model_type": "olmo2"}')
    write(folder / "model.safetensors", weights)
    write(folder / "README.md", b"not a loading file: never hashed")
    return folder


def rows(cache: Path) -> list[tuple]:
    with sqlite3.connect(cache / hash_cache.DB_NAME) as conn:
        return conn.execute("SELECT dev, ino, size, mtime_ns, ctime_ns, sha256 FROM file_sha256_v2").fetchall()


def key_of(path: Path) -> tuple:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120)


# ---- (1) the value: the cache never changes a hash ----


@pytest.mark.parametrize("size", [0, 1, 1000, (1 << 24) + 7])  # empty, tiny, one chunk, across a 16 MiB chunk edge
def test_file_sha256_equals_hashlib_cold_and_warm(tmp_path, reads, size):
    path = write(tmp_path / "f.safetensors", os.urandom(size))
    assert file_sha256(path) == oracle_sha256(path)  # cold: read
    assert file_sha256(path) == oracle_sha256(path)  # warm: from the database
    assert reads == [path]


def test_local_content_hash_is_unchanged_by_the_cache(tmp_path, private_cache, monkeypatch, reads):
    folder = checkpoint(tmp_path / "stage1-step0-tokens0K", os.urandom(5000))
    expected = oracle_content_hash(folder)
    assert local_content_hash(folder) == expected  # cold
    _content_hash.cache_clear()
    assert local_content_hash(folder) == expected  # warm, from the database only
    assert len(reads) == 2  # config.json and the weights, once each; README.md never
    assert len(rows(private_cache)) == 2
    # With no usable cache at all, the same value.
    monkeypatch.setenv("DORMANT_CACHE_DIR", str(write(tmp_path / "a-file", b"") / "cache"))
    _content_hash.cache_clear()
    assert local_content_hash(folder) == expected
    assert len(reads) == 4


def test_a_known_folder_keeps_its_known_commit(tmp_path):
    """Pinned value: the commit of a fixed folder, as computed before the cache (a changed formula would
    orphan every stored local checkpoint)."""
    folder = tmp_path / "ckpt"
    write(folder / "config.json", b"{}")
    write(folder / "model.safetensors", b"\0" * 64)
    write(folder / "README.md", b"x")
    pinned = "151abb9f58d3da1433682122b74a3b458eb27f8b413201d80fbd06eb41214ee6"  # the pre-cache code's output
    assert local_content_hash(folder) == oracle_content_hash(folder) == pinned
    _content_hash.cache_clear()
    assert local_content_hash(folder) == pinned  # warm


def test_replacing_a_pickle_only_checkpoints_weights_changes_its_hash(tmp_path, private_cache):
    """A folder without safetensors loads `pytorch_model.bin`: new weights there are a new commit (a rescoring,
    not "1 already stored"), cold and through the per-file cache; its sharded index counts too."""
    folder = tmp_path / "stage1-step0-tokens0K"
    write(folder / "config.json", b'{"model_type": "olmo2"}')
    write(folder / "pytorch_model.bin", b"old weights", mtime=1_700_000_000)
    before = local_content_hash(folder)
    assert before == oracle_content_hash(folder)
    write(folder / "pytorch_model.bin", b"new weights", mtime=1_700_000_500)
    _content_hash.cache_clear()
    after = local_content_hash(folder)
    assert after != before and after == oracle_content_hash(folder)
    write(folder / "pytorch_model.bin.index.json", b"{}")
    assert local_content_hash(folder) not in (before, after)


def test_pickles_beside_safetensors_leave_the_hash_as_it_was(tmp_path):
    """transformers loads the safetensors then: a Trainer's training_args.bin or optimizer.pt beside them
    changes nothing (a stored local checkpoint keeps its commit)."""
    folder = checkpoint(tmp_path / "ckpt", b"w" * 10)
    before = local_content_hash(folder)
    write(folder / "training_args.bin", b"x")
    write(folder / "optimizer.pt", b"y")
    _content_hash.cache_clear()
    assert local_content_hash(folder) == before == oracle_content_hash(folder)


def test_local_content_hash_follows_symlinks_and_skips_folders(tmp_path):
    """As before the scandir rewrite: a symlinked file (a Hub snapshot's layout) counts, a folder never does."""
    blobs = write(tmp_path / "blobs" / "abc", os.urandom(300))
    folder = checkpoint(tmp_path / "ckpt", b"w" * 10)
    (folder / "model-00002-of-00002.safetensors").symlink_to(blobs)
    (folder / "extra.safetensors").mkdir()
    (folder / "dangling.safetensors").symlink_to(tmp_path / "missing")
    assert local_content_hash(folder) == oracle_content_hash(folder)


@pytest.mark.parametrize(
    "name",
    ["config.json", "model.safetensors", "model-00001-of-00003.safetensors", "model.safetensors.index.json",
     "tokenizer.json", "README.md", "config.json.bak", "xconfig.json", "a/model.safetensors", ".safetensors",
     "model.safetensors\n", "pytorch_model.bin", "merges.txt", "sub/merges.txt"],
)  # fmt: skip
def test_is_loading_file_is_fnmatch(name):

    assert hub.is_loading_file(name) == any(fnmatch(name, p) for p in hub.ALLOW_PATTERNS)


# ---- (2) reuse: hard links hash once, a second process reads nothing ----


def test_hard_links_hash_once_and_a_second_process_reads_nothing(tmp_path, private_cache, reads):
    weights = os.urandom(3 << 20)
    init = checkpoint(tmp_path / "series" / "stage1-step0-tokens0K", weights)
    expected = oracle_content_hash(init)
    linked = []  # linked before any hash: a new link moves the inode's ctime, part of the key
    for step in (10, 20, 30):
        folder = tmp_path / "series" / f"stage1-step{step}-tokens{step}K"
        folder.mkdir()
        for name in ("config.json", "model.safetensors"):
            os.link(init / name, folder / name)
        linked.append(folder)
    assert local_content_hash(init) == expected
    assert {r[:5] for r in rows(private_cache)} == {key_of(init / "config.json"), key_of(init / "model.safetensors")}
    assert {r[5] for r in rows(private_cache)} == {
        oracle_sha256(init / "config.json"),
        hashlib.sha256(weights).hexdigest(),
    }
    assert [local_content_hash(f) for f in linked] == [expected] * 3
    assert len(reads) == 2  # in this process: the links were not read

    # A fresh process whose hashing raises: every answer must come from the database. A file it has never
    # seen proves the patch bites.
    fresh = write(tmp_path / "fresh.safetensors", b"never hashed")
    code = f"""
import json, sys
from fnmatch import fnmatch
from pathlib import Path
from dormant_tasks.checkpoints import hub
def refuse(path):
    raise AssertionError(f"read {{path}}")
hub.sha256_file = refuse
from dormant_tasks.checkpoints.loading import local_content_hash
out = {{"hashes": [local_content_hash(Path(p)) for p in {json.dumps([str(f) for f in linked])}]}}
try:
    hub.file_sha256(Path({str(fresh)!r}))
    out["fresh"] = "not read"
except AssertionError as e:
    out["fresh"] = str(e)
print(json.dumps(out))
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["hashes"] == [expected] * 3
    assert out["fresh"].startswith("read ") and out["fresh"].endswith("fresh.safetensors")


def test_concurrent_processes_share_one_database(tmp_path, private_cache):
    files = [write(tmp_path / f"f{i}.safetensors", os.urandom(1000 + i)) for i in range(40)]
    code = f"""
import json
from fnmatch import fnmatch
from pathlib import Path
from dormant_tasks.checkpoints.hub import file_sha256
print(json.dumps([file_sha256(Path(p)) for p in {json.dumps([str(f) for f in files])}]))
"""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    expected = [oracle_sha256(f) for f in files]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert json.loads(out) == expected
    assert sorted(r[5] for r in rows(private_cache)) == sorted(expected)  # one row per file, INSERT OR REPLACE


# ---- (3) a changed file is hashed again ----


def test_new_content_and_mtime_give_a_new_hash(tmp_path, reads):
    path = write(tmp_path / "model.safetensors", b"a" * 100)
    first = file_sha256(path)
    write(path, b"b" * 100, mtime=PAST + 60)  # same size, same inode, new mtime
    assert file_sha256(path) == oracle_sha256(path) != first
    assert len(reads) == 2


def test_a_replaced_file_with_the_old_mtime_is_hashed_again(tmp_path, reads):
    """rsync -t / cp -p + rename: same size and mtime, but a new inode."""
    path = write(tmp_path / "model.safetensors", b"a" * 100)
    first, before = file_sha256(path), path.stat()
    os.replace(write(tmp_path / "tmp", b"b" * 100), path)
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ino != before.st_ino
    assert file_sha256(path) == oracle_sha256(path) != first
    assert len(reads) == 2


def test_an_in_place_rewrite_with_its_mtime_put_back_is_hashed_again(tmp_path, reads):
    """Same inode, same size, the old mtime restored (`touch -r`, `os.utime`): only the ctime tells, and the cache
    keys on it, so the checkpoint's content hash (its commit) changes and it is never "already stored"."""
    folder = checkpoint(tmp_path / "ckpt", b"\x00" * 64)
    weights = folder / "model.safetensors"
    commit, before = local_content_hash(folder), weights.stat()
    with open(weights, "r+b") as f:  # rewritten in place: same inode, same size
        f.write(b"\x01" * 64)
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = weights.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    _content_hash.cache_clear()  # the in-process lru of folders: a new process asks the cache
    assert file_sha256(weights) == oracle_sha256(weights)
    assert local_content_hash(folder) != commit


def test_a_just_modified_file_is_hashed_but_not_stored(tmp_path, private_cache, reads):
    path = write(tmp_path / "model.safetensors", b"being written", mtime=time.time())
    assert file_sha256(path) == oracle_sha256(path)
    assert rows(private_cache) == []  # racy: a same-size rewrite in the same tick could keep this mtime
    assert file_sha256(path) == oracle_sha256(path)
    assert len(reads) == 2


def test_a_folder_edited_in_place_gets_a_new_commit(tmp_path):
    folder = checkpoint(tmp_path / "ckpt", b"w" * 100)
    before = local_content_hash(folder)
    (folder / "config.json").write_text('{"model_type": "olmo2", "x": 1}')  # now: a new mtime and size
    after = local_content_hash(folder)
    assert after == oracle_content_hash(folder) != before


# ---- (4) no usable cache: hashing without it, silently ----


@pytest.mark.parametrize("kind", ["corrupt", "dir-is-a-file", "db-is-a-dir", "garbage-table"])
def test_an_unusable_cache_falls_back_silently(tmp_path, monkeypatch, caplog, reads, kind):
    cache = tmp_path / "bad"
    if kind == "corrupt":
        write(cache / hash_cache.DB_NAME, os.urandom(4096))
    elif kind == "dir-is-a-file":  # unwritable even as root: mkdir under a regular file
        cache = write(tmp_path / "plain-file", b"") / "cache"
    elif kind == "db-is-a-dir":
        (cache / hash_cache.DB_NAME).mkdir(parents=True)
    else:  # a valid sqlite file whose table has another shape
        cache.mkdir()
        with sqlite3.connect(cache / hash_cache.DB_NAME) as conn:
            conn.execute("CREATE TABLE file_sha256_v2 (x)")
    monkeypatch.setenv("DORMANT_CACHE_DIR", str(cache))
    path = write(tmp_path / "model.safetensors", os.urandom(2000))
    with caplog.at_level(logging.DEBUG, logger="dormant_tasks.checkpoints.hash_cache"):
        assert file_sha256(path) == oracle_sha256(path)
        assert file_sha256(path) == oracle_sha256(path)
    assert len(reads) == 2  # hashed each time, never failed
    assert all(r.levelno <= logging.DEBUG for r in caplog.records)
    assert any("hash cache" in r.getMessage() for r in caplog.records)


def test_a_read_only_cache_is_still_read(tmp_path, monkeypatch, private_cache, reads):
    path = write(tmp_path / "model.safetensors", os.urandom(2000))
    file_sha256(path)
    # The same database, opened read-only by sqlite (what a cache on a read-only mount looks like, even as root).
    real_connect = sqlite3.connect
    monkeypatch.setattr(
        hash_cache.sqlite3,
        "connect",
        lambda p, **kw: real_connect(f"{Path(p).as_uri()}?mode=ro", uri=True, **kw),
    )
    monkeypatch.setattr(hash_cache, "_local", type(hash_cache._local)())  # forget this thread's connection
    other = write(tmp_path / "other.safetensors", os.urandom(2000))
    assert file_sha256(path) == oracle_sha256(path)  # a hit
    assert file_sha256(other) == oracle_sha256(other)  # a miss whose write fails: still the right hash
    assert reads == [path, other]


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("DORMANT_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hash_cache.db_path() == tmp_path / "explicit" / "file-sha256.sqlite"
    monkeypatch.setenv("DORMANT_CACHE_DIR", "")
    assert hash_cache.cache_dir() == tmp_path / "xdg" / "dormant-heads"
    monkeypatch.delenv("DORMANT_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert hash_cache.cache_dir() == tmp_path / "home" / ".cache" / "dormant-heads"


def test_the_suite_never_uses_the_real_home_cache():
    assert Path(os.environ["DORMANT_CACHE_DIR"]).resolve() != (Path.home() / ".cache" / "dormant-heads").resolve()


def test_hash_cache_is_stdlib_only():
    """It sits below `hub` and imports nothing of the package, nor any third-party module."""
    tree = ast.parse(Path(hash_cache.__file__).read_text())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
    assert not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}


def test_the_benchmark_runs_small(tmp_path):
    """benchmarks/hash_cache.py end to end on a tiny series (its timing verdict is not the test's business)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "hash_cache.py"), "--folders", "3", "--size-mb", "1"]
        + ["--skip-uncached", "--workdir", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    assert "cold / warm:" in done.stdout and "linear extrapolation from 3 folders" in done.stdout
    assert list(tmp_path.iterdir()) == []  # the series is removed
