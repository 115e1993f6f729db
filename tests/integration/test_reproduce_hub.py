"""`dormant reproduce xu-2026` against a real Hub server (olah) on loopback: tiny random OLMo-1 checkpoints
published as `allenai/OLMo-1B-0724-hf` under nine of the ten revision names of Xu's table (one left out, to be
reported), plus `main` and a branch that is no checkpoint. The command runs in a subprocess whose unmodified
huggingface_hub talks to the server only."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hub_server import REPO_ROOT, OlahServer, build_mirror_repo, client_env

from dormant_tasks.findings import xu_model
from tests.builders.families import make_model

pytestmark = pytest.mark.slow
MODEL = "allenai/OLMo-1B-0724-hf"
LEFT_OUT = "step285000-tokens597B"  # a revision of Xu's list the repo does not hold


@pytest.fixture(scope="module")
def xu_hub(tmp_path_factory, tiny_tokenizer, olah):
    root = tmp_path_factory.mktemp("xu-hub")
    folders = {}
    names = [n for n in xu_model(MODEL).revisions if n != LEFT_OUT] + ["main", "notes"]
    for seed, name in enumerate(names):
        model = make_model("olmo", tiny_tokenizer, seed=seed)  # a tiny OLMo-1, as the engine's tests build it
        folders[name] = root / "checkpoints" / name
        model.save_pretrained(folders[name])
        tiny_tokenizer.save_pretrained(folders[name])
    build_mirror_repo(root / "mirrors", MODEL, folders)
    with OlahServer(root / "mirrors", root / "olah") as server:
        yield server


def reproduce(endpoint, tmp_path, *args) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "flows.cli", "reproduce", "xu-2026", "--model", MODEL, "--device", "cpu", *args]
    env = client_env(endpoint, tmp_path / "hf")
    return subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)


def test_dry_run_says_what_it_would_download_and_writes_nothing(xu_hub, tmp_path):
    store = tmp_path / "store"
    r = reproduce(xu_hub.endpoint, tmp_path, "--store", str(store), "--limit", "4", "--dry-run")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "9 of " in r.stdout and "checkpoints selected" in r.stdout  # nine of Xu's names are listed
    assert "step126000-tokens264B" in r.stdout and LEFT_OUT not in r.stdout
    assert not store.exists()


def test_reproduce_prints_ours_beside_the_published_shares(xu_hub, tmp_path):
    store = tmp_path / "store"
    r = reproduce(xu_hub.endpoint, tmp_path, "--store", str(store), "--limit", "4")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(step\S+)\s+(\S+(?: \S+)?)\s+(\S+(?: \S+)?)\s+(\S+)\s+(\S+)$", line)
        if m:
            rows[m.group(1)] = m.groups()[1:]
    assert list(rows) == list(xu_model(MODEL).revisions)  # every revision of the table, in its order
    assert rows[LEFT_OUT] == ("not tracked", "not given", "-", "-")
    ours, published, diff, _ = rows["step126000-tokens264B"]
    assert published == "70.3" and float(diff) == pytest.approx(float(ours) - 70.3, abs=0.051)
    assert rows["step1000-tokens2B"][1] == "0.0"  # published: 0.0% up to 52B tokens
    assert "published: Xu" in r.stdout and "arXiv 2606.02378" in r.stdout
    assert LEFT_OUT in r.stderr  # named as not in the series
