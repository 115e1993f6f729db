"""`dormant score` in-process through `flows.cli.main`, on real tiny checkpoints saved to disk."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import BloomConfig, BloomForCausalLM, Olmo2ForCausalLM, PreTrainedTokenizerFast

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.engine.scoring import ScoringOptions, score_texts
from dormant_tasks.tiny import tiny_config
from dormant_tasks.tracking.calibration import load_calibration
from flows.cli import main


def run_cli(capsys, *args) -> tuple[int, str]:
    code = main(["score", *map(str, args)])
    return code, capsys.readouterr().err


def assert_refused(capsys, out, *args, match: str):
    code, err = run_cli(capsys, *args, "--out", out)
    assert code == 2
    last = err.strip().splitlines()[-1]  # above it, transformers' own weight-loading progress bar
    assert last.startswith("dormant score: error: ") and match in last, err
    assert list(out.parent.iterdir()) == [], "no output file, not even a temp file"


def test_scores_a_texts_file(tiny_model_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("The cat sat on the mat.\n\nA second, somewhat longer line of text to score.\n", encoding="utf-8")
    out = tmp_path / "out" / "scores.parquet"
    out.parent.mkdir()
    code, err = run_cli(
        capsys,
        "--model",
        tiny_model_dir,
        "--texts",
        texts,
        "--batch-size",
        2,
        "--device",
        "cpu",
        "--scores",
        "ahon_ln,awft",
        "random",
        "--out",
        out,
    )
    assert code == 0, err
    table = pq.read_table(out)
    assert {"model_id", "revision", "input_index", "score_fn", "layer", "head_index", "score"} <= set(
        table.column_names
    )
    assert table.num_rows == 2 * 3 * 2 * 4  # inputs x functions x layers x heads
    # the resolved source (an absolute folder), a real revision (the folder's name) and the calibration set
    assert set(table.column("model_id").to_pylist()) == {str(tiny_model_dir.resolve())}
    assert set(table.column("revision").to_pylist()) == {tiny_model_dir.name}
    (calibration_id,) = set(table.column("calibration_id").to_pylist())
    assert calibration_id == load_calibration(str(texts)).calibration_id
    # the Python API returns the same data
    model, tokenizer = load_model_and_tokenizer(tiny_model_dir, device="cpu")
    api = score_texts(
        model, tokenizer, load_calibration(texts).texts, ScoringOptions(("ahon_ln", "awft", "random"))
    ).to_table()
    key = ["input_index", "score_fn", "layer", "head_index"]
    got = table.select(key + ["score"]).sort_by([(k, "ascending") for k in key])
    want = api.sort_by([(k, "ascending") for k in key])
    np.testing.assert_allclose(got.column("score").to_numpy(), want.column("score").to_numpy(), rtol=1e-6)
    assert list(out.parent.iterdir()) == [out]


def test_default_calibration_is_winogrande(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "w.parquet"
    code, err = run_cli(
        capsys, "--model", tiny_model_dir, "--limit", 3, "--scores", "ahon", "--device", "cpu", "--out", out
    )
    assert code == 0, err
    assert sorted(set(pq.read_table(out).column("input_index").to_pylist())) == [0, 1, 2]


def test_not_a_model(tmp_path, capsys):
    (tmp_path / "notamodel").mkdir()
    (tmp_path / "out").mkdir()
    assert_refused(
        capsys, tmp_path / "out" / "s.parquet", "--model", tmp_path / "notamodel", "--limit", 2, match="notamodel"
    )


def test_model_without_attention_interface(tmp_path, tiny_tokenizer, capsys):
    path = tmp_path / "bloom"
    BloomForCausalLM(BloomConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, n_layer=2, n_head=4)).save_pretrained(
        path
    )
    tiny_tokenizer.save_pretrained(path)
    (tmp_path / "out").mkdir()
    assert_refused(
        capsys,
        tmp_path / "out" / "s.parquet",
        "--model",
        path,
        "--limit",
        2,
        "--device",
        "cpu",
        match="AttentionInterface",
    )


def test_empty_texts_file(tiny_model_dir, tmp_path, capsys):
    texts = tmp_path / "empty.txt"
    texts.write_text("\n  \n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    assert_refused(
        capsys, tmp_path / "out" / "s.parquet", "--model", tiny_model_dir, "--texts", texts, match="holds no text"
    )


@pytest.fixture
def dropping_tokenizer_model(tmp_path):
    """A real tokenizer with no special tokens whose BPE has no unknown token, so characters it never saw
    vanish: a text of only such characters tokenises to zero tokens. Saved with a tiny OLMo-2."""
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["the cat sat on the mat"] * 10, trainers.BpeTrainer(vocab_size=60, show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok)
    assert tokenizer("☃☃")["input_ids"] == []
    torch.manual_seed(0)
    config = tiny_config(tokenizer, n_layers=2, n_heads=4, hidden_size=64)
    path = tmp_path / "dropping"
    Olmo2ForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_text_with_zero_tokens(dropping_tokenizer_model, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("the cat\n☃☃\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    assert_refused(
        capsys,
        tmp_path / "out" / "s.parquet",
        "--model",
        dropping_tokenizer_model,
        "--texts",
        texts,
        "--device",
        "cpu",
        match="text 1",
    )


def test_out_of_memory_keeps_its_cause(tiny_model_dir, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
    from dormant_tasks.errors import CheckpointError

    def no_memory(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", no_memory)
    with pytest.raises(CheckpointError, match=r"out of memory loading .*OutOfMemoryError: CUDA out of memory"):
        load_model_and_tokenizer(tiny_model_dir)


def test_out_writes_the_format_its_suffix_names(tiny_model_dir, tmp_path, capsys, caplog):
    """.csv is CSV (not Parquet under a .csv name), with the same columns; another suffix is one line, no file;
    --max-tokens truncates the inputs as track's does."""
    import pyarrow.csv as pcsv

    texts = tmp_path / "texts.txt"
    texts.write_text("The cat sat on the mat and looked at the dog for a long while.\nShort.\n", encoding="utf-8")
    common = ["--model", tiny_model_dir, "--texts", texts, "--device", "cpu", "--scores", "ahon_ln"]
    csv_out, parquet_out = tmp_path / "csv" / "s.csv", tmp_path / "pq" / "s.parquet"
    for folder in (csv_out.parent, parquet_out.parent, tmp_path / "json"):
        folder.mkdir()
    code, err = run_cli(capsys, *common, "--out", csv_out)
    assert code == 0, err
    assert csv_out.read_bytes()[:4] != b"PAR1" and csv_out.read_text().startswith(
        '"model_id","revision","calibration_id"'
    )
    from_csv = pcsv.read_csv(csv_out)
    code, err = run_cli(capsys, *common, "--out", parquet_out, "--max-tokens", 4)
    assert code == 0, err
    from_parquet = pq.read_table(parquet_out)
    assert from_csv.column_names == from_parquet.column_names and from_csv.num_rows == from_parquet.num_rows
    assert "were cut to their first 4 tokens (--max-tokens)" in caplog.text  # --max-tokens 4 cuts both texts
    assert_refused(capsys, tmp_path / "json" / "s.json", *common, match="--out")
    code, err = run_cli(capsys, *common, "--out", tmp_path / "json" / "s.json")
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith(f"name a .parquet or .csv file (the suffix names the format), e.g. {tmp_path / 'json' / 's.parquet'}")
    )


def test_a_limit_above_the_set_s_size_says_all_texts_are_used(tiny_model_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("one text\nanother text\n", encoding="utf-8")
    out = tmp_path / "o" / "s.parquet"
    out.parent.mkdir()
    code, err = run_cli(
        capsys, "--model", tiny_model_dir, "--texts", texts, "--limit", 100000, "--scores", "ahon_ln", "--out", out
    )
    assert code == 0, err
    assert "dormant score: note: --limit 100,000: calibration set texts has only 2 texts; all of them are used" in err
