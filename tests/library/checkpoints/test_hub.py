"""The Hub side of checkpoints, without a Hub: file hashes, the free-disk check, retries, the import seam.

RepoFile entries are built here as the Hub's tree listing returns them; the real client against a real
server is exercised in tests/integration/test_hub_loopback.py.
"""

from __future__ import annotations

import ast
import hashlib
import subprocess
from pathlib import Path

import pytest
from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.hf_api import RepoFile

from dormant_tasks.checkpoints import hub
from dormant_tasks.checkpoints.hub import check_free_disk, verify_files, with_hub_retries
from dormant_tasks.errors import CheckpointError


def repo_file(path, data: bytes, lfs: bool):
    if lfs:
        sha = hashlib.sha256(data).hexdigest()
        return RepoFile(
            path=path, size=len(data), oid="0" * 40, lfs={"size": len(data), "oid": sha, "pointerSize": 130}
        )
    # The oracle for a plain blob's id is git itself.
    oid = (
        subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )
    return RepoFile(path=path, size=len(data), oid=oid)


def test_verify_files_against_hub_hashes(tmp_path):
    """sha256 for an LFS file, the git blob id (git itself as the oracle) for a plain one."""
    weights, config = b"\x00\x01weights" * 1000, b'{"model_type": "olmo2"}'
    (tmp_path / "model.safetensors").write_bytes(weights)
    (tmp_path / "config.json").write_bytes(config)
    files = [repo_file("model.safetensors", weights, lfs=True), repo_file("config.json", config, lfs=False)]
    verify_files("r@x", tmp_path, files)
    (tmp_path / "config.json").write_bytes(config + b" ")
    with pytest.raises(CheckpointError, match="r@x: config.json is corrupt"):
        verify_files("r@x", tmp_path, files)
    (tmp_path / "config.json").write_bytes(config)
    (tmp_path / "model.safetensors").write_bytes(weights[:-1] + b"X")
    with pytest.raises(CheckpointError, match="model.safetensors is corrupt"):
        verify_files("r@x", tmp_path, files)


def test_free_disk_check(tmp_path):
    """Sizes as the Hub lists them; one larger than any disk here stands for a checkpoint that does not fit."""
    snapshot = tmp_path / "models--org--m" / "snapshots" / ("a" * 40)  # not created yet: the check walks up
    check_free_disk("org/m@b", [RepoFile(path="model.safetensors", size=10**6, oid="0" * 40)], snapshot)
    with pytest.raises(CheckpointError, match=r"org/m@b needs 1000000000.00 GB .* free; pass --cache-dir"):
        check_free_disk("org/m@b", [RepoFile(path="model.safetensors", size=10**18, oid="0" * 40)], snapshot)
    check_free_disk("org/m@b", [RepoFile(path="model.safetensors", size=None, oid="0" * 40)], snapshot)  # skipped


def test_hub_retries_transient_errors_only():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("connection reset by peer")
        return "listed"

    assert with_hub_retries(flaky, "listing r", retries=2, backoff_s=0) == "listed" and len(calls) == 3
    calls.clear()
    with pytest.raises(CheckpointError, match=r"listing r: the Hub at .* did not answer after 2 attempts"):
        with_hub_retries(flaky, "listing r", retries=1, backoff_s=0)

    def broken(exc):
        calls.append(1)
        raise exc

    for exc, match in (
        (ValueError("bad json"), r"listing r failed \(ValueError: bad json\)"),
        (OfflineModeIsEnabled("offline"), "HF_HUB_OFFLINE is set"),
    ):
        calls.clear()
        with pytest.raises(CheckpointError, match=match):
            with_hub_retries(lambda exc=exc: broken(exc), "listing r", retries=3, backoff_s=0)
        assert len(calls) == 1, "a permanent error is not retried"


def test_hub_sits_below_checkpoints_and_loading():
    """`checkpoints` and `loading` import `hub`; `hub` imports neither (no import cycle), only the stdlib-only
    leaves `errors`, `hashing` and `offline`, and `hash_cache`."""
    tree = ast.parse(Path(hub.__file__).read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dormant_tasks")
    }
    assert imported == {
        "dormant_tasks.errors",
        "dormant_tasks.hashing",
        "dormant_tasks.offline",
        "dormant_tasks.checkpoints.hash_cache",
    }
