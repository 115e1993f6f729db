"""The integrity audit of a Hub series through the real huggingface_hub client and a real Hub server (olah) on
loopback: sharded tiny checkpoints as branches, reproducing the public cases of docs/CHECKPOINTS.md ("Integrity").

The branches (Pythia-style names, 1,024 tokens per step), weights as LFS objects except where said:
- step0 = step1 (plain git blobs, as some repos store small files): step1 a duplicate of step0;
- step2, step3: the final model again (a run of early branches identical to `main`, pythia-2.8b's case);
- step4, step7, step10: one set of weights at three scattered steps (OLMo-2 7B's case): 7 and 10 duplicates of 4;
- step5: the final model's first shard, its other shards its own (pythia-12b's case): a partial duplicate;
- step6: its second shard missing: incomplete;
- step8, step11 (plain git blobs), step12 and `main` = step12: their own weights.
The audit names each of these and flags nothing else, downloads no weight file (the client's cache holds none,
and the server's access log shows no request for one: the shard index, a small JSON, is read), and answers in
the three output forms. A second repo (STALE) has a branch whose shards are complete by their names
(`-of-00002`) but whose shard index lists six others (re-sharded, the index left behind): only the index
shows it incomplete.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from hub_server import REPO_ROOT, OlahServer, build_repo_fast, client_env

pytestmark = pytest.mark.slow
REPO = "test-org/audited"
STALE = "test-org/stale-index"
DORMANT = REPO_ROOT / ".venv" / "bin" / "dormant"
PLAIN = frozenset({"step0", "step1", "step11"})
EXPECTED = {
    "step1": ("duplicate", "step0"),
    "step2": ("duplicate", "step12"),
    "step3": ("duplicate", "step12"),
    "step5": ("partial duplicate", "step12"),
    "step6": ("incomplete", None),
    "step7": ("duplicate", "step4"),
    "step10": ("duplicate", "step4"),
    "main": ("main", "step12"),
}


def weight_requests(requests: str) -> list[str]:
    """The weight files (not the shard index) that the server's access log shows requested."""
    return re.findall(r"/resolve/\S+?\.(?:safetensors|bin|pt|pth)(?=[\s\"?]|$)", requests)


def checkpoint_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def audited_hub(tmp_path_factory, tiny_tokenizer, olah):
    """The mirror of the module docstring's branches, served by olah; yields (server, workdir)."""
    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config

    root = tmp_path_factory.mktemp("audit-hub")
    weights = {}
    for seed in (0, 4, 5, 6, 8, 11, 12):  # one random model per distinct set of weights
        torch.manual_seed(seed)
        folder = root / f"w{seed}"
        model = Olmo2ForCausalLM(tiny_config(tiny_tokenizer, n_layers=2, n_heads=4, hidden_size=64))
        model.save_pretrained(folder, max_shard_size="150KB")  # sharded: model-0000i-of-0000n + index
        tiny_tokenizer.save_pretrained(folder)
        weights[seed] = checkpoint_files(folder)
    shards = sorted(n for n in weights[12] if n.endswith(".safetensors"))
    assert len(shards) >= 3, shards
    partial = dict(weights[5]) | {shards[0]: weights[12][shards[0]]}
    incomplete = {k: v for k, v in weights[6].items() if k != shards[1]}
    branches = {
        "step0": weights[0],
        "step1": weights[0],
        "step2": weights[12],
        "step3": weights[12],
        "step4": weights[4],
        "step5": partial,
        "step6": incomplete,
        "step7": weights[4],
        "step8": weights[8],
        "step10": weights[4],
        "step11": weights[11],
        "step12": weights[12],
        "main": weights[12],
    }
    commits = build_repo_fast(root / "mirrors", REPO, branches, plain=PLAIN)
    torch.manual_seed(9)  # STALE: step1's shards re-saved in two, its index of six left behind
    model = Olmo2ForCausalLM(tiny_config(tiny_tokenizer, n_layers=2, n_heads=4, hidden_size=64))
    model.save_pretrained(root / "six", max_shard_size="150KB")
    model.save_pretrained(root / "two", max_shard_size="400KB")
    six, two = checkpoint_files(root / "six"), checkpoint_files(root / "two")
    assert sum(n.endswith(".safetensors") for n in two) == 2 and "of-00006" in "".join(six), sorted(six)
    index = "model.safetensors.index.json"
    stale = {"step0": weights[0], "step1": two | {index: six[index]}, "main": two}
    build_repo_fast(root / "mirrors", STALE, stale)
    (root / "commits.json").write_text(json.dumps(commits))
    with OlahServer(root / "mirrors", root / "olah") as server:
        yield server, root


def audit(server, hf_home: Path, fmt: str, repo: str = REPO) -> str:
    out = subprocess.run(
        [str(DORMANT), "checkpoints", "--model", repo, "--audit", "--tokens-per-step", "1024", "--format", fmt],
        capture_output=True,
        text=True,
        env=client_env(server.endpoint, hf_home) | {"PYTHONPATH": str(REPO_ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_audit_names_each_public_pattern_and_nothing_else(audited_hub, tmp_path):
    server, root = audited_hub
    log = root / "olah" / "olah.out"
    before = log.read_text(errors="replace") if log.exists() else ""
    rows = json.loads(audit(server, tmp_path / "hf", "json"))["branches"]
    found = {r["revision"]: (r["verdict"], r["other"]) for r in rows if r["verdict"] != "ok"}
    assert found == EXPECTED
    by_name = {r["revision"]: r for r in rows}
    assert by_name["step5"]["file"].endswith("-of-" + by_name["step5"]["file"].split("-of-")[1])  # a shard named
    assert "00001-of" in by_name["step5"]["file"]
    assert "00002-of" in by_name["step6"]["file"]  # the absent shard
    assert [r["revision"] for r in rows][-1] == "main"
    # no weight file downloaded: none in the client's cache, no file request in the server's access log
    assert not [p for p in (tmp_path / "hf").rglob("*") if p.suffix in (".safetensors", ".bin")]
    requests = log.read_text(errors="replace")[len(before) :]
    assert "/tree/" in requests  # the listings went through this server
    assert "/resolve/" in requests and "model.safetensors.index.json" in requests  # the shard index was read
    assert weight_requests(requests) == []


def test_a_shard_that_only_the_index_lists_is_incomplete(audited_hub, tmp_path):
    """Before the Hub branches' shard index was read, step1 passed: both its `-of-00002` shards are there."""
    server, root = audited_hub
    log = root / "olah" / "olah.out"
    before = log.read_text(errors="replace")
    rows = json.loads(audit(server, tmp_path / "hf", "json", STALE))["branches"]
    found = {r["revision"]: (r["verdict"], r["file"]) for r in rows if r["verdict"] != "ok"}
    assert found.pop("main")[0] == "main"
    assert found == {"step1": ("incomplete", "model-00001-of-00006.safetensors")}
    assert "6 shard(s) missing" in next(r["note"] for r in rows if r["revision"] == "step1")
    assert not [p for p in (tmp_path / "hf").rglob("*") if p.suffix in (".safetensors", ".bin")]
    assert weight_requests(log.read_text(errors="replace")[len(before) :]) == []


def test_audit_text_and_csv_forms(audited_hub, tmp_path):
    server, _ = audited_hub
    text = audit(server, tmp_path / "hf", "text")
    assert "step7" in text and "every weight file identical to step4's" in text
    summary = text.strip().splitlines()[-1]
    assert summary.startswith("13 branches of test-org/audited audited"), summary
    assert "no weights downloaded" in summary and "5 set aside, 2 not downloaded" in summary
    table = list(csv.DictReader(io.StringIO(audit(server, tmp_path / "hf", "csv"))))
    assert {r["revision"] for r in table if r["verdict"] == "duplicate"} == {
        "step1",
        "step2",
        "step3",
        "step7",
        "step10",
    }


def test_track_sets_duplicates_aside_and_refuses_partial_and_incomplete_branches_before_downloading(
    audited_hub, tmp_path
):
    """`dormant track` on the mirror: the five copies are recorded as set aside and never fetched, the partial
    duplicate and the incomplete branch are recorded as failed (exit 3) and never fetched, the rest is scored."""
    import pyarrow.parquet as pq

    server, root = audited_hub
    commits = json.loads((root / "commits.json").read_text())
    log = root / "olah" / "olah.out"
    before = log.read_text(errors="replace")
    store = tmp_path / "store"
    out = subprocess.run(
        [str(DORMANT), "track", "--model", REPO, "--tokens-per-step", "1024", "--store", str(store), "--no-report"]
        + ["--scores", "ahon_ln", "--limit", "4", "--cache-dir", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env=client_env(server.endpoint, tmp_path / "hf") | {"PYTHONPATH": str(REPO_ROOT)},
        timeout=900,
    )
    assert out.returncode == 3, out.stderr[-3000:]
    set_aside = pq.read_table(next((store / "set_aside_checkpoints").rglob("*.parquet"))).to_pylist()
    assert {r["revision"]: r["duplicate_of"] for r in set_aside} == {
        name: other for name, (kind, other) in EXPECTED.items() if kind == "duplicate"
    }
    failed = pq.read_table(next((store / "failed_checkpoints").rglob("*.parquet"))).to_pylist()
    assert {r["revision"] for r in failed} == {"step5", "step6"}
    assert "partial duplicate" in next(r["reason"] for r in failed if r["revision"] == "step5")
    stored = set(pq.read_table(next((store / "checkpoints").rglob("*.parquet"))).column("revision").to_pylist())
    assert stored == {"step0", "step4", "step8", "step11", "step12"}
    requests = log.read_text(errors="replace")[len(before) :]
    fetched = weight_requests(requests)
    for name in ("step1", "step2", "step3", "step5", "step6", "step7", "step10"):  # no weight ever downloaded
        assert not [r for r in fetched if f"/resolve/{commits[name]}/" in r], name
    assert f"/resolve/{commits['step4']}/" in requests  # a scored branch was fetched through this server


def test_track_dry_run_sums_the_listing_and_writes_nothing(audited_hub, tmp_path):
    """`dormant track --dry-run` on the mirror: the branches the audit keeps, the taus' checkpoint first, each with
    the bytes of the files a download would fetch (the listing's LFS sizes), their sum and the time; no weight
    requested, the shard index read without entering the Hub cache, no store, nothing in the working folder."""
    from dormant_tasks.checkpoints.hub import is_loading_file
    from dormant_tasks.tracking.dry_run import byte_size

    server, root = audited_hub
    log = root / "olah" / "olah.out"
    before = log.read_text(errors="replace")
    work, hf = tmp_path / "work", tmp_path / "hf"
    work.mkdir()
    out = subprocess.run(
        [str(DORMANT), "track", "--model", REPO, "--tokens-per-step", "1024", "--store", str(tmp_path / "store")]
        + ["--dry-run", "--format", "json", "--bandwidth", "8Mbit/s"],
        capture_output=True,
        text=True,
        cwd=work,
        env=client_env(server.endpoint, hf) | {"PYTHONPATH": str(REPO_ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    seeds = {"step12": 12, "step0": 0, "step4": 4, "step8": 8, "step11": 11}  # the genuine branches' weights
    assert [c["revision"] for c in plan["checkpoints"]] == list(seeds)  # the taus' checkpoint (the last) first
    on_disk = {
        name: sum(p.stat().st_size for p in (root / f"w{seed}").iterdir() if is_loading_file(p.name))
        for name, seed in seeds.items()
    }
    assert {c["revision"]: c["download_bytes"] for c in plan["checkpoints"]} == on_disk
    assert plan["download_bytes"] == sum(on_disk.values()) and plan["set_aside_or_refused"] == 7
    sizes = list(on_disk.values())
    assert plan["disk_at_once_bytes"] == max(a + b for a, b in zip(sizes, sizes[1:]))
    assert plan["download_seconds"] == round(sum(sizes) / 1e6, 1)
    requests = log.read_text(errors="replace")[len(before) :]
    assert "/tree/" in requests and "model.safetensors.index.json" in requests  # listed, the index read
    assert weight_requests(requests) == []
    assert not [p for p in hf.rglob("*") if p.is_file()]  # the Hub cache untouched
    assert not (tmp_path / "store").exists() and list(work.iterdir()) == []
    text = subprocess.run(
        [str(DORMANT), "track", "--model", REPO, "--tokens-per-step", "1024", "--dry-run", "--bandwidth", "8Mbit/s"],
        capture_output=True,
        text=True,
        cwd=work,
        env=client_env(server.endpoint, hf) | {"PYTHONPATH": str(REPO_ROOT)},
        timeout=300,
    ).stdout
    assert "5 of 12 checkpoints selected, 0 already stored, 7 set aside by the audit" in text
    assert f"to score: 5 checkpoints; to download: {byte_size(sum(sizes))}" in text
    assert "download time at 8Mbit/s: " in text and "nothing was downloaded or written" in text
    assert not [p for p in hf.rglob("*") if p.is_file()] and list(work.iterdir()) == []
