"""A checkpoint whose files disagree is named from its own files in one line (issue 54, item 5): a config.json
whose vocabulary is not its weights', a safetensors header that lies about a shape, and the truncated-copy advice
only where a file really is cut short; transformers' coloured load report stays off stderr."""

from __future__ import annotations

import json
import shutil
import struct

import pytest

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.errors import CheckpointError
from tests.builders.processes import REPO, cli_env, run_cli
from tests.library.checkpoints.test_impossible_checkpoints import copy_with_config

Q = "model.layers.0.self_attn.q_proj.weight"


def rewrite_header(src, dst, shapes: dict):
    """A copy of the checkpoint whose safetensors header gives the named tensors other shapes; the data untouched."""
    shutil.copytree(src, dst)
    file = dst / "model.safetensors"
    data = file.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    for key, shape in shapes.items():
        header[key]["shape"] = shape
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= length  # padded with spaces to the same length: the offsets stay right
    file.write_bytes(data[:8] + text.ljust(length) + data[8 + length :])
    return dst


def refusal(folder) -> str:
    with pytest.raises(CheckpointError) as e:
        load_model_and_tokenizer(folder, device="cpu")
    message = str(e.value)
    assert "\n" not in message and "above report" not in message
    return message


def test_a_config_whose_vocabulary_is_not_its_weights_is_named(tiny_model_dir, tmp_path):
    message = refusal(copy_with_config(tiny_model_dir, tmp_path / "vocab", vocab_size=1000))
    assert "config.json says vocab_size 1000 but model.safetensors holds " in message
    assert "[512, 64]" in message and "fix config.json or re-download" in message
    assert "cut short" not in message and "truncated" not in message


def test_a_header_that_lies_about_a_shape_is_named_from_both_files(tiny_model_dir, tmp_path):
    message = refusal(rewrite_header(tiny_model_dir, tmp_path / "shape", {Q: [32, 128]}))
    assert f"config.json makes {Q} [64, 64] but model.safetensors holds {Q} [32, 128]" in message
    assert "cut short" not in message


def test_a_header_whose_shape_does_not_fit_its_data_is_named(tiny_model_dir, tmp_path):
    message = refusal(rewrite_header(tiny_model_dir, tmp_path / "bytes", {Q: [64, 65]}))
    assert f"model.safetensors's header gives {Q} the shape [64, 65] (F32) but 16384 bytes of data" in message
    assert "the header is wrong" in message and "the file is cut short" not in message


@pytest.mark.parametrize(("keep", "says"), [(-1000, "header places"), (100, "ends inside its own header")])
def test_a_file_really_cut_short_gets_the_truncated_advice(tiny_model_dir, tmp_path, keep, says):
    bad = tmp_path / "cut"
    shutil.copytree(tiny_model_dir, bad)
    file = bad / "model.safetensors"
    file.write_bytes(file.read_bytes()[:keep])
    message = refusal(bad)
    assert says in message and "the file is cut short" in message and "re-download or re-copy" in message


def test_nothing_of_transformers_reaches_stderr(tiny_model_dir, tmp_path):
    """A real `dormant score` run on the vocabulary mismatch: one line on stderr, exit 2, no load report table
    (before: transformers' coloured table, then "see the above report")."""
    bad = copy_with_config(tiny_model_dir, tmp_path / "vocab", vocab_size=1000)
    r, _ = run_cli(["score", "--model", bad, "--out", tmp_path / "x.parquet", "--limit", "2"], cli_env(), REPO)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "config.json says vocab_size 1000" in lines[0], r.stderr
    assert "LOAD REPORT" not in r.stderr and "\x1b" not in r.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_weights_missing_from_the_files_are_said_in_one_line(tiny_model_dir, tmp_path, caplog):
    from safetensors.torch import load_file, save_file

    bad = tmp_path / "missing"
    shutil.copytree(tiny_model_dir, bad)
    tensors = load_file(bad / "model.safetensors")
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, bad / "model.safetensors", metadata={"format": "pt"})
    with caplog.at_level("WARNING", logger="dormant_tasks.checkpoints.loading"):
        load_model_and_tokenizer(bad, device="cpu")
    (record,) = [r for r in caplog.records if r.name == "dormant_tasks.checkpoints.loading"]
    assert "1 weight was missing from its files initialised at random (model.layers.1.mlp.up_proj.weight)" in (
        record.getMessage()
    )
