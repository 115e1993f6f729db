"""`dormant publish --repo-id` and `--store hf://datasets/...` with the real huggingface_hub client (and real
`dormant` processes) against a loopback Hub that takes commits (`hub_dataset_server.py`: what it fakes and why).

The installed client uploads LFS-mode files through Xet when `hf_xet` is installed; the loopback Hub speaks the
git-lfs batch API, so every process here runs with the client's own switch `HF_HUB_DISABLE_XET=1`, and
`test_the_client_uses_preupload_lfs_and_one_commit` records the endpoints it used. Small text files go inline in
the commit either way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hub_dataset_server import DatasetHub

from tests.builders.processes import cli_env, run_cli
from tests.builders.publishing import store_to_publish
from tests.builders.stores import MODEL

REPO_ID = "lab/tiny-series-heads"
TOKEN = "hf_writer"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return store_to_publish(tmp_path_factory.mktemp("src") / "store")


@pytest.fixture
def hub():
    with DatasetHub(tokens=(TOKEN,)) as server:
        yield server


def env_for(hub: DatasetHub, tmp_path: Path, **extra: str) -> dict:
    env = cli_env(
        HF_ENDPOINT=hub.endpoint,
        HF_TOKEN=TOKEN,
        HF_HUB_DISABLE_XET="1",  # the loopback Hub speaks git-lfs, not Xet (module docstring)
        HF_HOME=str(tmp_path / "hf-home"),
        DORMANT_CACHE_DIR=str(tmp_path / "cache"),
        HF_HUB_DISABLE_TELEMETRY="1",
        **extra,
    )
    env.pop("HF_HUB_OFFLINE")  # cli_env's default: these runs talk to the loopback Hub
    return env


def publish(store: Path, env: dict, cwd: Path, *more: str, repo: str = REPO_ID):
    r, _ = run_cli(["publish", "--store", store, "--repo-id", repo, "--license", "cc-by-4.0", *more], env, cwd)
    return r


def ok(r) -> None:
    assert r.returncode == 0, r.stderr[-3000:]


def one_line(r) -> str:
    """The run's error: exit 2, one `error:` line, last, no traceback (the notes said before it may precede it)."""
    err = r.stderr.strip()
    errors = [line for line in err.splitlines() if "error:" in line]
    assert r.returncode == 2 and len(errors) == 1 and err.endswith(errors[0]) and "Traceback" not in err, err
    return errors[0]


@pytest.mark.slow
def test_the_client_uses_preupload_lfs_and_one_commit(store, hub, tmp_path):
    env = env_for(hub, tmp_path)
    r = publish(store, env, tmp_path, "--private")
    ok(r)
    assert hub.repos[REPO_ID].private
    assert hub.commit_count(REPO_ID) == 2  # the Hub's initial commit (.gitattributes), then one of ours
    used = {route for _, route in hub.calls}
    assert {
        "create_repo",
        "repo_info",
        "tree",
        "validate_yaml",
        "preupload",
        "lfs_batch",
        "lfs_upload",
        "commit",
    } <= used
    assert sum(route == "commit" for _, route in hub.calls) == 1
    files = hub.files(REPO_ID)
    record = json.loads(files["_published.json"])
    assert set(files) == {".gitattributes", "_published.json", *record["files"]}
    assert "MiB" in r.stderr and "uploading" in r.stderr  # the size, said before the upload
    assert f"published: {hub.endpoint}/datasets/{REPO_ID} (commit" in r.stdout


@pytest.mark.slow
def test_a_republication_makes_no_commit_and_a_change_sends_only_what_changed(store, hub, tmp_path):
    env = env_for(hub, tmp_path)
    ok(publish(store, env, tmp_path))
    first = hub.files(REPO_ID)
    hub.calls.clear()
    r = publish(store, env, tmp_path)
    ok(r)
    assert "up to date" in r.stdout and hub.commit_count(REPO_ID) == 2
    assert not {"preupload", "commit", "lfs_upload"} & {route for _, route in hub.calls}
    # --with-inputs: the per-input files, and the files that name them (manifest, checksums, card, record), only
    hub.calls.clear()
    ok(publish(store, env, tmp_path, "--with-inputs"))
    assert hub.commit_count(REPO_ID) == 3
    now = hub.files(REPO_ID)
    changed = {p for p in now if first.get(p) != now[p]}
    assert {p.split("/")[0] for p in changed} == {
        "input_scores",
        "checkpoints",
        "_sums",
        "README.md",
        "_published.json",
    }
    uploads = sum(route == "lfs_upload" for _, route in hub.calls)
    assert uploads == len([p for p in changed if p.endswith(".parquet")])  # unchanged Parquet files are not sent
    # and back without them: the per-input files the tool wrote are deleted in the same one commit
    ok(publish(store, env, tmp_path))
    assert hub.commit_count(REPO_ID) == 4 and hub.files(REPO_ID) == first


@pytest.mark.slow
def test_a_series_opened_from_the_hub_gives_the_stores_findings_and_report(store, hub, tmp_path):
    env = env_for(hub, tmp_path)
    ok(publish(store, env, tmp_path))
    local, _ = run_cli(["findings", "--store", store, "--format", "json"], env, tmp_path)
    remote, _ = run_cli(["findings", "--store", f"hf://datasets/{REPO_ID}", "--format", "json"], env, tmp_path)
    ok(local)
    ok(remote)
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    assert "fetching hf://datasets/" in remote.stderr
    # cached: a second read fetches nothing (one question for the head commit)
    hub.calls.clear()
    r, _ = run_cli(["status", "--store", f"hf://datasets/{REPO_ID}"], env, tmp_path)
    ok(r)
    assert f"{MODEL}: 4 checkpoints" in r.stdout and "fetching" not in r.stderr
    assert {route for _, route in hub.calls} == {"repo_info"}
    for cmd, out in (("report", "rep"), ("report", "rep-local")):
        where = f"hf://datasets/{REPO_ID}" if out == "rep" else str(store)
        ok(run_cli([cmd, "--store", where, "--reports-dir", tmp_path / out], env, tmp_path)[0])
    pngs = sorted(p.name for p in (tmp_path / "rep" / "figures").glob("*.png"))
    assert pngs and all(
        (tmp_path / "rep" / "figures" / n).read_bytes() == (tmp_path / "rep-local" / "figures" / n).read_bytes()
        for n in pngs
    )
    # the Python API opens it the same way
    code = f"import dormant_tasks; print(dormant_tasks.open_store('hf://datasets/{REPO_ID}').series())"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and MODEL in r.stdout, r.stderr[-2000:]


@pytest.mark.slow
def test_a_repo_with_files_the_tool_did_not_write_is_refused_unless_allowed(store, hub, tmp_path):
    env = env_for(hub, tmp_path)
    ok(publish(store, env, tmp_path))
    hub.add_commit(REPO_ID, {"notes/analysis.md": b"my own notes\n"})
    before = hub.commit_count(REPO_ID)
    err = one_line(publish(store, env, tmp_path, "--with-inputs"))
    assert "did not write" in err and "notes/analysis.md" in err and "--allow-foreign" in err
    assert hub.commit_count(REPO_ID) == before
    ok(publish(store, env, tmp_path, "--with-inputs", "--allow-foreign"))
    assert hub.commit_count(REPO_ID) == before + 1 and hub.files(REPO_ID)["notes/analysis.md"] == b"my own notes\n"


@pytest.mark.slow
def test_refusals_before_any_upload(store, hub, tmp_path):
    env = env_for(hub, tmp_path)
    err = one_line(publish(store, {**env, "HF_TOKEN": "hf_wrong"}, tmp_path))
    assert "refused the token" in err and REPO_ID not in hub.repos
    no_token = {k: v for k, v in env.items() if k != "HF_TOKEN"}
    hub.calls.clear()
    err = one_line(publish(store, no_token, tmp_path))
    assert "no Hugging Face token" in err and not hub.calls
    err = one_line(run_cli(["status", "--store", "hf://datasets/lab/missing"], env, tmp_path)[0])
    assert "no dataset repo lab/missing" in err


@pytest.mark.slow
def test_a_network_failure_at_the_commit_publishes_nothing(store, hub, tmp_path):
    env = env_for(hub, tmp_path)
    hub.drop_commit = True
    err = one_line(publish(store, env, tmp_path))
    assert "nothing was published" in err, err
    assert hub.commit_count(REPO_ID) == 1  # the repo as created, no commit of ours
    hub.drop_commit = False
    ok(publish(store, env, tmp_path))
    assert hub.commit_count(REPO_ID) == 2


@pytest.mark.slow
def test_a_killed_upload_leaves_no_partial_commit(store, hub, tmp_path):
    """SIGKILL while the client is sending the Parquet files: the repo keeps its head; the next run publishes all
    of it, in one commit."""
    env = env_for(hub, tmp_path)
    ok(publish(store, env, tmp_path))
    before = hub.files(REPO_ID), hub.commit_count(REPO_ID)
    hub.hold_uploads = True
    args = ["publish", "--store", store, "--repo-id", REPO_ID, "--license", "cc-by-4.0", "--with-inputs"]
    process = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *map(str, args)],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert hub.upload_started.wait(timeout=300), "the upload never started"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    hub.hold_uploads = False
    hub.release.set()
    assert (hub.files(REPO_ID), hub.commit_count(REPO_ID)) == before
    ok(publish(store, env, tmp_path, "--with-inputs"))
    assert hub.commit_count(REPO_ID) == before[1] + 1
    record = json.loads(hub.files(REPO_ID)["_published.json"])
    assert record["with_inputs"] and set(hub.files(REPO_ID)) == {".gitattributes", "_published.json", *record["files"]}
