"""Listing, downloading and loading checkpoints through the real, unmocked huggingface_hub client talking
HTTP to a real Hub server (olah) on loopback.

The client side runs in subprocesses: huggingface_hub reads HF_ENDPOINT when it is imported, so a fresh
interpreter with the environment set is the only faithful way to point it at the server.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hub_server import REPO_ROOT, OlahServer, build_mirror_repo, client_env

pytestmark = pytest.mark.slow
REPO = "test-org/tiny-olmo2"  # hub_series.repo, spelled out for readability
DORMANT = REPO_ROOT / ".venv" / "bin" / "dormant"
TEXT = "The trophy does not fit into the suitcase because it is too large."


def run_client(
    code: str, endpoint: str, hf_home: Path, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=client_env(endpoint, hf_home),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_logits(folder: Path) -> list[float]:
    from dormant_tasks.checkpoints.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(folder, None, "float32", "cpu")
    with torch.no_grad():
        return model(**tokenizer(TEXT, return_tensors="pt")).logits[0, -1, :16].tolist()  # [16] of the last position


def test_cli_lists_branches_in_training_order(hub_server, hub_series, tmp_path):
    out = subprocess.run(
        [str(DORMANT), "checkpoints", "--model", REPO, "--include-main"],
        capture_output=True,
        text=True,
        env=client_env(hub_server.endpoint, tmp_path),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    names = [line.split()[0] for line in lines[1:5]]
    assert names == ["step50-tokens102K", "stage1-step100-tokens205K", "stage2-ingredient1-step20-tokens41K", "main"]
    for line in lines[1:5]:  # the short commit shown is the server's commit of that branch
        assert hub_series.commits[line.split()[0]][:10] in line
    assert "skipped 1 names that are not checkpoints: experiment-notes" in out.stderr  # a note: a diagnostic


def test_download_at_each_branch_matches_its_checkpoint(hub_server, hub_series, tmp_path):
    """Every branch is fetched pinned to its commit with only the needed files, loads, and has its own weights."""
    code = """
        import json, sys, torch
        from dormant_tasks.checkpoints.sources import list_revisions
        from dormant_tasks.checkpoints.loading import load_checkpoint
        listing = list_revisions(sys.argv[1], include_main=True)
        out = {}
        for rev in listing.revisions:
            loaded = load_checkpoint(sys.argv[1], rev, device="cpu", cache_dir=sys.argv[2], keep=True)
            with torch.no_grad():
                logits = loaded.model(**loaded.tokenizer(sys.argv[3], return_tensors="pt")).logits[0, -1, :16]
            out[rev.name] = {"commit": loaded.commit, "path": str(loaded.local_path),
                             "files": sorted(p.name for p in loaded.local_path.iterdir()), "logits": logits.tolist()}
        print(json.dumps(out))
    """
    cache = tmp_path / "cache"
    result = run_client(code, hub_server.endpoint, tmp_path / "hf", REPO, str(cache), TEXT)
    assert result.returncode == 0, result.stderr[-3000:]
    fetched = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(fetched) == set(hub_series.folders) - {"experiment-notes"}
    for branch, got in fetched.items():
        folder = hub_series.folders[branch]
        assert got["commit"] == hub_series.commits[branch]
        assert got["files"] == sorted(p.name for p in folder.iterdir())
        assert sha256(Path(got["path"]) / "model.safetensors") == sha256(folder / "model.safetensors")
        assert torch.allclose(torch.tensor(got["logits"]), torch.tensor(local_logits(folder)), atol=1e-5)
    logits = [tuple(got["logits"]) for got in fetched.values()]
    assert len(set(logits)) == len(logits), "branches must carry different weights"


def test_evict_removes_one_revision_only(hub_server, hub_series, tmp_path):
    """`hub.evict_revision` deletes exactly one revision; `load_checkpoint(keep=False)` asks it once loaded."""
    code = """
        import sys
        from dormant_tasks.checkpoints.sources import list_revisions
        from dormant_tasks.checkpoints.hub import evict_revision
        from dormant_tasks.checkpoints.loading import fetch_revision, load_checkpoint
        revs = list_revisions(sys.argv[1]).revisions
        paths = [fetch_revision(sys.argv[1], r, cache_dir=sys.argv[2]) for r in revs[:2]]
        freed = evict_revision(sys.argv[1], revs[0].commit, cache_dir=sys.argv[2])
        loaded = load_checkpoint(sys.argv[1], revs[2], device="cpu", cache_dir=sys.argv[2], keep=False)
        print(freed, paths[0].exists(), paths[1].exists(), (paths[1] / "model.safetensors").exists(),
              loaded.commit == revs[2].commit, loaded.local_path.exists())
    """
    result = run_client(code, hub_server.endpoint, tmp_path / "hf", REPO, str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr[-3000:]
    freed, first_exists, second_exists, second_weights, same_commit, third_exists = result.stdout.split()
    assert int(freed) >= (hub_series.folders["step50-tokens102K"] / "model.safetensors").stat().st_size
    assert (first_exists, second_exists, second_weights) == ("False", "True", "True")
    assert (same_commit, third_exists) == ("True", "False")


def test_unknown_repo_and_revision_give_one_line_errors(hub_server, tmp_path):
    code = """
        import sys
        from dormant_tasks.checkpoints.naming import Revision
        from dormant_tasks.checkpoints.sources import list_revisions
        from dormant_tasks.errors import CheckpointError
        from dormant_tasks.checkpoints.loading import fetch_revision
        for call in (lambda: list_revisions("test-org/no-such-repo"),
                     lambda: fetch_revision(sys.argv[1], Revision("stage1-step999-tokens9K", 1, 999, 9000), retries=0)):
            try:
                call()
                print("no error")
            except CheckpointError as e:
                print(e)
    """
    result = run_client(code, hub_server.endpoint, tmp_path / "hf", REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    repo_msg, rev_msg = result.stdout.strip().splitlines()[-2:]
    assert "test-org/no-such-repo" in repo_msg and "not found" in repo_msg
    assert "stage1-step999-tokens9K" in rev_msg and "dormant checkpoints" in rev_msg


def test_corrupt_cached_file_is_detected_evicted_and_refetched(hub_server, hub_series, tmp_path):
    """A cached weight file whose bytes no longer match the Hub's sha256 (bit rot, a truncated copy) is
    refused with a clear error and removed; the next fetch downloads it again intact."""
    code = """
        import sys
        from dormant_tasks.checkpoints.sources import list_revisions
        from dormant_tasks.errors import CheckpointError
        from dormant_tasks.checkpoints.loading import fetch_revision
        rev = list_revisions(sys.argv[1]).revisions[0]
        path = fetch_revision(sys.argv[1], rev, cache_dir=sys.argv[2])
        blob = (path / "model.safetensors").resolve()
        data = bytearray(blob.read_bytes()); data[-1] ^= 0xFF; blob.write_bytes(bytes(data))
        try:
            fetch_revision(sys.argv[1], rev, cache_dir=sys.argv[2])
            print("not detected")
        except CheckpointError as e:
            print(e)
        print(path.exists())
        print(fetch_revision(sys.argv[1], rev, cache_dir=sys.argv[2]))
    """
    result = run_client(code, hub_server.endpoint, tmp_path / "hf", REPO, str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr[-3000:]
    message, existed_after_error, path = result.stdout.strip().splitlines()[-3:]
    assert "model.safetensors is corrupt" in message and "step50-tokens102K" in message
    assert existed_after_error == "False"
    assert sha256(Path(path) / "model.safetensors") == sha256(
        hub_series.folders["step50-tokens102K"] / "model.safetensors"
    )


def test_interrupted_download_leaves_nothing_and_the_retry_succeeds(hub_series, tmp_path):
    """The server is killed while the ~130 MB weight file is streaming; the client fails with one clear line
    and leaves no partial file or half revision in the cache; with the server back, the fetch succeeds."""
    fetch = """
        import sys
        from dormant_tasks.checkpoints.sources import list_revisions
        from dormant_tasks.errors import CheckpointError
        from dormant_tasks.checkpoints.loading import fetch_revision
        rev = list_revisions(sys.argv[1]).revisions[0]
        try:
            print(fetch_revision(sys.argv[1], rev, cache_dir=sys.argv[2], retries=0))
        except CheckpointError as e:
            print(e)
            sys.exit(2)
    """
    BIG_REPO, BIG_BRANCH = hub_series.big_repo, hub_series.big_branch
    cache = tmp_path / "cache"
    blobs = cache / f"models--{BIG_REPO.replace('/', '--')}" / "blobs"
    weights_sha = sha256(hub_series.big_folder / "model.safetensors")  # the LFS etag names the blob being written
    server = OlahServer(hub_series.mirrors, tmp_path / "olah").start()
    try:
        client = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(fetch), BIG_REPO, str(cache)],
            env=client_env(server.endpoint, tmp_path / "hf"),
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        killed = False
        while client.poll() is None and not killed:
            partial = list(blobs.glob(f"{weights_sha}.*.incomplete")) if blobs.exists() else []
            if any(p.stat().st_size > 0 for p in partial if p.exists()):
                server.stop()
                killed = True
            time.sleep(0.002)
        stdout, stderr = client.communicate(timeout=300)
        assert killed, f"the download ended before the server could be stopped: {stdout} {stderr[-2000:]}"
        assert client.returncode == 2, stderr[-3000:]
        assert BIG_REPO in stdout and BIG_BRANCH in stdout and len(stdout.strip().splitlines()) == 1
        assert not list(cache.rglob("*.incomplete"))
        assert not (blobs.parent / "snapshots" / hub_series.big_commit).exists()
        assert not (blobs.exists() and any(blobs.iterdir())), "no half revision stays in the cache"

        server.start()
        client = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(fetch), BIG_REPO, str(cache)],
            env=client_env(server.endpoint, tmp_path / "hf"),
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        server.stop()
    assert client.returncode == 0, client.stderr[-3000:]
    path = Path(client.stdout.strip().splitlines()[-1])
    assert path.name == hub_series.big_commit
    for f in hub_series.big_folder.iterdir():
        assert sha256(path / f.name) == sha256(f), f.name
    from dormant_tasks.checkpoints.loading import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(path, None, "float32", "cpu")
    assert model.config.num_hidden_layers == 8


def test_dormant_score_on_a_hub_revision(hub_server, hub_series, tmp_path):
    """`dormant score --model REPO --revision BRANCH` loads through the Hub client and writes per-input scores."""
    import pyarrow.parquet as pq

    texts = tmp_path / "texts.txt"
    texts.write_text(f"{TEXT}\nA second, shorter sentence.\n")
    out = tmp_path / "scores.parquet"
    branch = "stage1-step100-tokens205K"
    result = subprocess.run(
        [
            str(DORMANT),
            "score",
            "--model",
            REPO,
            "--revision",
            branch,
            "--texts",
            str(texts),
            "--scores",
            "ahon_ln",
            "awft",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
        env=client_env(hub_server.endpoint, tmp_path / "hf"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = pq.read_table(out).to_pandas()
    assert set(table["revision"]) == {branch} and set(table["model_id"]) == {REPO}
    assert len(table) == 2 * 2 * 2 * 4  # inputs x functions x layers x heads

    from flows.cli import main

    local_out = tmp_path / "local.parquet"  # the same checkpoint scored from the folder the branch was built from
    assert (
        main(
            [
                "score",
                "--model",
                str(hub_series.folders[branch]),
                "--texts",
                str(texts),
                "--scores",
                "ahon_ln",
                "awft",
                "--device",
                "cpu",
                "--out",
                str(local_out),
            ]
        )
        == 0
    )
    local = pq.read_table(local_out).to_pandas()
    key = ["input_index", "score_fn", "layer", "head_index"]
    merged = table.merge(local, on=key, suffixes=("_hub", "_local"))
    assert len(merged) == len(table)
    assert np.allclose(merged["score_hub"], merged["score_local"], rtol=1e-6, equal_nan=True)


# ---- A Pythia-style series: GPT-NeoX checkpoints on `step{N}` branches, tokens from the repo's known tokens per step

PYTHIA_REPO = "EleutherAI/pythia-tiny"  # matches EleutherAI/pythia-*: 2,097,152 tokens per step
PYTHIA_BRANCHES = {
    "step0": 0,
    "step1": 1,
    "step2": 2,
    "step4": 3,
    "step512": 4,
    "step1000": 5,
    "step2000": 6,
    "main": 7,
}


@pytest.fixture(scope="module")
def pythia_hub(tmp_path_factory, tiny_tokenizer, olah):
    """A loopback Hub of its own serving PYTHIA_REPO: one random tiny GPT-NeoX (fused qkv, partial rotary,
    parallel residual) per branch, branches created out of order."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    root = tmp_path_factory.mktemp("pythia-hub")
    folders = {}
    for branch, seed in sorted(PYTHIA_BRANCHES.items(), key=lambda kv: kv[0]):  # step1000 before step2
        torch.manual_seed(seed)
        config = GPTNeoXConfig(
            vocab_size=len(tiny_tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=512,
            pad_token_id=tiny_tokenizer.pad_token_id,
        )
        folders[branch] = root / "checkpoints" / branch
        GPTNeoXForCausalLM(config).save_pretrained(folders[branch])
        tiny_tokenizer.save_pretrained(folders[branch])
    commits = build_mirror_repo(root / "mirrors", PYTHIA_REPO, folders)
    with OlahServer(root / "mirrors", root / "olah") as server:
        yield server, folders, commits


def test_pythia_branches_list_in_step_order_with_tokens(pythia_hub, tmp_path):
    server, _, commits = pythia_hub
    out = subprocess.run(
        [str(DORMANT), "checkpoints", "--model", PYTHIA_REPO, "--include-main"],
        capture_output=True,
        text=True,
        env=client_env(server.endpoint, tmp_path),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:9]]
    assert [r[0] for r in rows] == ["step0", "step1", "step2", "step4", "step512", "step1000", "step2000", "main"]
    assert [r[3] for r in rows[:-1]] == ["0", "2.097M", "4.194M", "8.389M", "1.074B", "2.097B", "4.194B"]
    for row in rows:
        assert commits[row[0]][:10] == row[-1]
    assert "8 of 8 checkpoints" in out.stdout


def test_pythia_branches_download_load_and_score(pythia_hub, tmp_path):
    """Each branch is fetched pinned to its commit and loads with its own weights (as OLMo-2's do), and the
    GPT-NeoX checkpoints score: the traceback of issue 21 (no `o_proj`) is gone."""
    server, folders, commits = pythia_hub
    code = """
        import json, sys, torch
        from dormant_tasks.checkpoints.sources import list_revisions
        from dormant_tasks.checkpoints.loading import load_checkpoint
        from dormant_tasks.engine.options import ScoringOptions
        from dormant_tasks.engine.scoring import score_texts
        listing = list_revisions(sys.argv[1], include_main=True)
        out = {}
        for rev in listing.revisions:
            loaded = load_checkpoint(sys.argv[1], rev, device="cpu", cache_dir=sys.argv[2], keep=False)
            with torch.no_grad():
                logits = loaded.model(**loaded.tokenizer(sys.argv[3], return_tensors="pt")).logits[0, -1, :16]
            fhon = score_texts(loaded.model, loaded.tokenizer, [sys.argv[3]], ScoringOptions(("fhon",))).get("fhon")
            out[rev.name] = {"commit": loaded.commit, "tokens": rev.tokens, "logits": logits.tolist(),
                             "fhon_finite": bool((fhon == fhon).all())}
        print(json.dumps(out))
    """
    result = run_client(code, server.endpoint, tmp_path / "hf", PYTHIA_REPO, str(tmp_path / "cache"), TEXT)
    assert result.returncode == 0, result.stderr[-3000:]
    fetched = json.loads(result.stdout.strip().splitlines()[-1])
    assert list(fetched) == ["step0", "step1", "step2", "step4", "step512", "step1000", "step2000", "main"]
    for branch, got in fetched.items():
        assert got["commit"] == commits[branch] and got["fhon_finite"]
        assert torch.allclose(torch.tensor(got["logits"]), torch.tensor(local_logits(folders[branch])), atol=1e-5)
        if branch != "main":
            assert got["tokens"] == int(branch[4:]) * 2_097_152
    assert len({tuple(got["logits"]) for got in fetched.values()}) == len(fetched)


# ---- OLMo-3 and OLMoE: their branch forms (docs/CHECKPOINTS.md), listed through the real client

OLMO3_REPO = "allenai/Olmo-3-1025-7B"  # its tokens per step are known per stage: 4,194,304 / 2,097,152 / 4,194,304
OLMO3_BRANCHES = [
    "stage3-step11921",
    "stage1-step1000",
    "stage2-step47684",
    "stage1-step0",
    "stage2-step1000",
    "main",
    "stage2-step47684-mix-a-from-2T-ckpt",  # a mix-ablation branch (`...-mix-*-from-2T-ckpt`): not the main run
]
OLMOE_REPO = "allenai/OLMoE-1B-7B-0924"
OLMOE_BRANCHES = ["step1220000-tokens5117B", "step5000-tokens20B", "step1200000-tokens5033B", "main", "fp32"]


@pytest.fixture(scope="module")
def families_hub(tmp_path_factory, tiny_tokenizer, olah):
    """One loopback Hub serving an OLMo-3-named and an OLMoE-named repo: one tiny random checkpoint per branch
    (the names are under test here, not the weights), branches created out of order."""
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config

    root = tmp_path_factory.mktemp("families-hub")
    commits = {}
    for repo, branches in ((OLMO3_REPO, OLMO3_BRANCHES), (OLMOE_REPO, OLMOE_BRANCHES)):
        folders = {}
        for seed, branch in enumerate(branches):
            torch.manual_seed(seed)
            folders[branch] = root / "checkpoints" / repo / branch
            Olmo2ForCausalLM(tiny_config(tiny_tokenizer, n_layers=1, n_heads=2, hidden_size=32)).save_pretrained(
                folders[branch]
            )
            tiny_tokenizer.save_pretrained(folders[branch])
        commits[repo] = build_mirror_repo(root / "mirrors", repo, folders)
    with OlahServer(root / "mirrors", root / "olah") as server:
        yield server, commits


def list_checkpoints(server, repo: str, hf_home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(DORMANT), "checkpoints", "--model", repo, "--include-main"],
        capture_output=True,
        text=True,
        env=client_env(server.endpoint, hf_home),
        timeout=120,
    )


def test_olmo3_branches_list_in_stage_order_with_each_stage_s_tokens(families_hub, tmp_path):
    server, commits = families_hub
    out = list_checkpoints(server, OLMO3_REPO, tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:7]]
    assert [r[0] for r in rows] == [
        "stage1-step0",
        "stage1-step1000",
        "stage2-step1000",
        "stage2-step47684",
        "stage3-step11921",
        "main",
    ]
    # tokens of each name: its step x its stage's batch, stage 2 and 3 counted from their own start
    assert [r[3] for r in rows[:-1]] == ["0", "4.194B", "2.097B", "100B", "50B"]
    for row in rows:
        assert commits[OLMO3_REPO][row[0]][:10] == row[-1]
    assert "stage2-step47684-mix-a-from-2T-ckpt" in out.stderr  # listed as skipped, not fatal


def test_olmoe_branches_list_with_the_names_token_counts(families_hub, tmp_path):
    server, commits = families_hub
    out = list_checkpoints(server, OLMOE_REPO, tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:5]]
    assert [r[0] for r in rows] == ["step5000-tokens20B", "step1200000-tokens5033B", "step1220000-tokens5117B", "main"]
    assert [r[3] for r in rows[:-1]] == ["20B", "5.033T", "5.117T"]
    assert "fp32" in out.stderr  # main in float32: not a checkpoint of the series
