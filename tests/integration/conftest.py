"""Fixtures of the integration tests: a real Hub server (olah) on loopback serving tiny OLMo-2 checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hub_server import OlahServer, OlahUnavailable, build_mirror_repo, olah_cli

REPO = "test-org/tiny-olmo2"
BIG_REPO = "test-org/tiny-olmo2-big"
# Branch -> seed of its random init. The forms of docs/CHECKPOINTS.md: an early unprefixed stage-1 branch, a prefixed
# one, a stage-2 ingredient (its token count restarts), `main`, and a name that is not a checkpoint.
BRANCH_SEEDS = {
    "step50-tokens102K": 1,
    "stage1-step100-tokens205K": 2,
    "stage2-ingredient1-step20-tokens41K": 3,
    "main": 4,
    "experiment-notes": 1,
}
BIG_BRANCH = "stage1-step400-tokens819K"


@dataclass
class HubSeries:
    repo: str
    big_repo: str
    big_branch: str
    mirrors: Path
    folders: dict[str, Path]  # branch -> the local checkpoint folder it was built from
    commits: dict[str, str]  # branch -> commit sha on the server
    big_folder: Path
    big_commit: str


@pytest.fixture(scope="session")
def olah():
    try:
        return olah_cli()
    except OlahUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def hub_series(tmp_path_factory, tiny_tokenizer, olah) -> HubSeries:
    """Two mirrored repos: REPO with one random tiny OLMo-2 per branch (different weights), and BIG_REPO
    with one ~130 MB checkpoint, big enough for a download to be stopped half-way."""
    import torch
    from transformers import Olmo2ForCausalLM

    from dormant_tasks.tiny import tiny_config

    root = tmp_path_factory.mktemp("hub")
    folders = {}
    for branch, seed in BRANCH_SEEDS.items():
        torch.manual_seed(seed)
        folders[branch] = root / "checkpoints" / branch
        Olmo2ForCausalLM(tiny_config(tiny_tokenizer, n_layers=2, n_heads=4, hidden_size=64)).save_pretrained(
            folders[branch]
        )
        tiny_tokenizer.save_pretrained(folders[branch])
    commits = build_mirror_repo(root / "mirrors", REPO, folders)

    torch.manual_seed(5)
    big_folder = root / "checkpoints-big" / BIG_BRANCH
    Olmo2ForCausalLM(tiny_config(tiny_tokenizer, n_layers=8, n_heads=8, hidden_size=512)).save_pretrained(big_folder)
    tiny_tokenizer.save_pretrained(big_folder)
    big_commit = build_mirror_repo(root / "mirrors", BIG_REPO, {BIG_BRANCH: big_folder})[BIG_BRANCH]
    return HubSeries(REPO, BIG_REPO, BIG_BRANCH, root / "mirrors", folders, commits, big_folder, big_commit)


@pytest.fixture(scope="session")
def hub_server(hub_series, tmp_path_factory):
    with OlahServer(hub_series.mirrors, tmp_path_factory.mktemp("olah")) as server:
        yield server
