"""A checkpoint that needs its own Python code is refused in one line, and its code never runs, even with a
`y` on stdin (transformers asks `[y/N]` when `trust_remote_code` is left unset: issue 27, item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.errors import CheckpointError

REPO = Path(__file__).resolve().parents[3]


def _custom_code_checkpoint(folder: Path, tokenizer, marker: Path, on: str) -> Path:
    """A real tokenizer beside a config whose `auto_map` names a Python file that would write `marker`.
    `on`: "model" (AutoModelForCausalLM / AutoConfig) or "tokenizer" (AutoTokenizer)."""
    tokenizer.save_pretrained(folder)
    (folder / "evil.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('the checkpoint code ran')\n"
        "from transformers import PretrainedConfig, PreTrainedTokenizerFast\n"
        "class EvilConfig(PretrainedConfig):\n    model_type = 'evilmodel'\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n",
        encoding="utf-8",
    )
    auto_map = {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps({"model_type": "evilmodel", "auto_map": auto_map}))
    if on == "tokenizer":
        cfg = json.loads((folder / "tokenizer_config.json").read_text())
        cfg["auto_map"] = {"AutoTokenizer": [None, "evil.EvilTokenizer"]}
        cfg["tokenizer_class"] = "EvilTokenizer"
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("on", ["model", "tokenizer"])
def test_echo_y_into_score_runs_no_checkpoint_code(on, tiny_tokenizer, tmp_path):
    marker = tmp_path / "RAN"
    ckpt = _custom_code_checkpoint(tmp_path / "am2", tiny_tokenizer, marker, on)
    texts = tmp_path / "texts.txt"
    texts.write_text("The cat sat on the mat.\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "mods")}
    args = ["score", "--model", ckpt, "--texts", texts, "--device", "cpu", "--out", tmp_path / "s.parquet"]
    r = subprocess.run(
        [sys.executable, "-m", "flows.cli", *map(str, args)],
        input="y\n" * 50,  # every prompt answered yes: none may be asked
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert not marker.exists(), "the checkpoint's own code ran"
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr
    assert "needs its own Python code" in r.stderr, r.stderr
    assert "[y/N]" not in r.stdout + r.stderr
    assert not (tmp_path / "s.parquet").exists()


def test_the_loader_refuses_custom_code_without_reading_stdin(tiny_tokenizer, tmp_path, monkeypatch):
    marker = tmp_path / "RAN"
    ckpt = _custom_code_checkpoint(tmp_path / "am2", tiny_tokenizer, marker, "model")

    def no_stdin(*_):
        raise AssertionError("stdin was read")

    monkeypatch.setattr("builtins.input", no_stdin)
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "mods"))
    with pytest.raises(CheckpointError, match="needs its own Python code"):
        load_model_and_tokenizer(ckpt, device="cpu")
    assert not marker.exists()
