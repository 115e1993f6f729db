"""The tiny OLMo-2 pretraining run (issue 3): branch-named, loadable, deterministic, atomic, incremental.

Runs are real (real BPE tokenizer, real Olmo2ForCausalLM, real AdamW) on the first lines of the bundled
demo corpus, shrunk through `pretrain_tiny`'s keyword arguments so that one run takes seconds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from dormant_tasks.errors import ConfigError
from dormant_tasks.tiny import (
    BOUNDARY,
    TinyRunConfig,
    checkpoint_steps,
    learning_rate,
    pretrain_tiny,
    train_tokenizer,
    training_sequences,
)
from dormant_tasks.tracking.calibration import DEMO_CORPUS
from flows.cli import main

STEPS, BATCH, SEQ = 30, 4, 32
SMALL = dict(
    n_layers=2, n_heads=2, hidden_size=32, vocab_size=320, seq_len=SEQ, batch_size=BATCH, lr=3e-3, warmup_steps=5
)
NAME = re.compile(r"^stage1-step(\d+)-tokens(\d+)([KMBT]?)$")
UNIT = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[:120]) + "\n", encoding="utf-8")
    return path


def run(out, corpus, steps=STEPS, seed=0, **overrides):
    return pretrain_tiny(out, steps=steps, seed=seed, corpus=corpus, threads=1, progress=False, **(SMALL | overrides))


@pytest.fixture(scope="module")
def series(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("series") / "tiny"
    return run(out, corpus)


def weights(folder):
    return load_file(str(folder / "model.safetensors"))


def folders(out):
    return sorted(p.name for p in out.iterdir() if p.is_dir())


def test_checkpoint_steps_are_dense_early_sparse_late_and_end_on_the_last_step():
    assert checkpoint_steps(3000) == [0, 10, 25, 50, 100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000]
    assert checkpoint_steps(30) == [0, 10, 25, 30]
    assert checkpoint_steps(5500)[-4:] == [3000, 4000, 5000, 5500]
    assert checkpoint_steps(1) == [0, 1]


def test_learning_rate_warms_up_linearly_then_decays_to_the_floor():
    config = TinyRunConfig(steps=100, lr=1e-2, warmup_steps=10, min_lr_ratio=0.1)
    assert learning_rate(config, 5) == pytest.approx(5e-3)
    assert learning_rate(config, 10) == pytest.approx(1e-2)
    assert learning_rate(config, 100) == pytest.approx(1e-3)
    decay = [learning_rate(config, s) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(decay, decay[1:]))


def test_every_training_sequence_starts_with_the_boundary_token_and_follows_the_documents(corpus):
    texts = corpus.read_text(encoding="utf-8").splitlines()[:20]
    tokenizer = train_tokenizer(texts, vocab_size=320)
    boundary = tokenizer.convert_tokens_to_ids(BOUNDARY)
    sequences = training_sequences(tokenizer, texts, SEQ)  # [sequence, seq_len]
    assert sequences.shape[1] == SEQ and len(sequences) > 1
    assert (sequences[:, 0] == boundary).all()
    stream = []
    for text in texts:  # oracle: each document as `tokenizer(text)` gives it, boundary first
        stream.extend(tokenizer(text)["input_ids"])
    body = sequences[:, 1:].reshape(-1).tolist()
    assert [boundary] + body == stream[: len(body) + 1]


def test_checkpoints_are_branch_named_in_training_order_with_real_token_counts(series):
    manifest = json.loads((series.out / "series.json").read_text())
    assert manifest["complete"] is True
    assert manifest["checkpoints"] == [c.name for c in series.checkpoints]
    assert sorted(manifest["checkpoints"]) == folders(series.out)  # nothing half-written is left behind
    steps = []
    for name in manifest["checkpoints"]:
        step, count, unit = NAME.match(name).groups()
        state = json.loads((series.out / name / "trainer_state.json").read_text())
        assert state["step"] == int(step)
        assert state["tokens"] == int(step) * BATCH * SEQ  # every sequence is SEQ tokens, boundary included
        assert int(count) * UNIT[unit] == pytest.approx(state["tokens"], abs=UNIT[unit] / 2)
        assert state["seed"] == 0
        steps.append(int(step))
    assert steps == checkpoint_steps(STEPS)


def test_checkpoints_load_with_auto_classes_and_keep_the_sink_embedding_at_zero(series, corpus):
    text = corpus.read_text(encoding="utf-8").splitlines()[0]
    for ckpt in (series.checkpoints[0], series.checkpoints[-1]):
        folder = series.out / ckpt.name
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
        ids = tokenizer(text, return_tensors="pt").input_ids  # [1, S]
        boundary = tokenizer.convert_tokens_to_ids(BOUNDARY)
        assert ids[0, 0].item() == boundary == model.config.pad_token_id
        assert type(model).__name__ == "Olmo2ForCausalLM"
        assert model.config.num_hidden_layers == SMALL["n_layers"]
        assert model.config.num_attention_heads == SMALL["n_heads"]
        assert torch.count_nonzero(model.get_input_embeddings().weight[boundary]) == 0


def test_training_lowers_the_loss_of_the_saved_weights(series, corpus):
    texts = corpus.read_text(encoding="utf-8").splitlines()[:8]

    def loss(ckpt):
        folder = series.out / ckpt.name
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        with torch.no_grad():
            return sum(
                model(input_ids=(ids := tokenizer(t, return_tensors="pt").input_ids[:, :SEQ]), labels=ids).loss.item()
                for t in texts
            ) / len(texts)

    first, last = series.checkpoints[0], series.checkpoints[-1]
    assert loss(last) < loss(first) - 0.1
    assert last.loss < first.loss


@pytest.mark.slow
def test_same_seed_gives_identical_weights_and_another_seed_differs(series, corpus, tmp_path):
    again = run(tmp_path / "again", corpus)
    assert [c.name for c in again.checkpoints] == [c.name for c in series.checkpoints]
    for ckpt in series.checkpoints:
        mine, theirs = weights(series.out / ckpt.name), weights(again.out / ckpt.name)
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[k], theirs[k]) for k in mine), ckpt.name
    other = run(tmp_path / "other", corpus, seed=1)
    last = series.checkpoints[-1].name
    mine, theirs = weights(series.out / last), weights(other.out / last)
    assert not all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_rerun_with_the_same_options_is_a_no_op(series, corpus):
    before = {name: (series.out / name / "model.safetensors").stat().st_mtime_ns for name in folders(series.out)}
    threads = torch.get_num_threads()
    again = run(series.out, corpus)
    assert again.trained is False
    assert again.checkpoints == series.checkpoints
    assert {n: (series.out / n / "model.safetensors").stat().st_mtime_ns for n in folders(series.out)} == before
    assert torch.get_num_threads() == threads


@pytest.mark.slow
def test_an_interrupted_run_is_completed_with_the_same_weights(series, corpus, tmp_path):
    out = tmp_path / "interrupted"
    first = run(out, corpus)
    last = first.checkpoints[-1].name
    expected = weights(out / last)
    # What a kill during the last save leaves: a temp folder, no final folder, an incomplete manifest.
    (out / last).rename(out / f".tmp-{last}-99999")
    manifest = json.loads((out / "series.json").read_text())
    (out / "series.json").write_text(json.dumps(manifest | {"complete": False}))
    resumed = run(out, corpus)
    assert resumed.trained is True
    assert folders(out) == sorted(c.name for c in first.checkpoints)
    got = weights(out / last)
    assert all(torch.equal(expected[k], got[k]) for k in expected)
    assert json.loads((out / "series.json").read_text())["complete"] is True


def test_an_incompatible_rerun_is_refused(series, corpus, tmp_path):
    with pytest.raises(ConfigError, match=r"different config.*steps"):
        run(series.out, corpus, steps=STEPS + 5)
    with pytest.raises(ConfigError, match=r"different config.*hidden_size"):
        run(series.out, corpus, hidden_size=64)
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("not a series")
    with pytest.raises(ConfigError, match="not empty"):
        run(stranger, corpus)


def test_bad_recipe_values_are_refused_before_anything_is_written(corpus, tmp_path):
    with pytest.raises(ConfigError, match="steps"):
        run(tmp_path / "a", corpus, steps=0)
    with pytest.raises(ConfigError, match="divisible"):
        run(tmp_path / "b", corpus, n_heads=3)
    with pytest.raises(ConfigError, match="unknown recipe"):
        run(tmp_path / "c", corpus, layers=2)
    assert not any(tmp_path.iterdir())


def test_cli_help_and_bad_steps(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["pretrain-tiny", "--help"])
    assert exit_info.value.code == 0
    assert "--steps" in capsys.readouterr().out
    assert main(["pretrain-tiny", "--model", str(tmp_path / "s"), "--steps", "0"]) == 2
    err = capsys.readouterr().err
    assert "pretrain-tiny" in err and "steps" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_threads_default_to_the_cores_this_process_may_use_and_a_bad_count_is_one_line(capsys, tmp_path):
    """`--threads` of `demo` and `pretrain-tiny` (issue 43): the cores of this process's affinity by default, the
    count the pretraining gets; 0 is refused in one line before anything is written."""
    import os

    from dormant_tasks.options import cores_seen
    from flows.cli import build_parser

    assert cores_seen() == len(os.sched_getaffinity(0))
    for command in ("demo", "pretrain-tiny"):
        args = build_parser().parse_args([command, "--model", str(tmp_path / "s")])
        assert args.threads == cores_seen()
        assert build_parser().parse_args([command, "--model", str(tmp_path / "s"), "--threads", "1"]).threads == 1
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--model", str(tmp_path / "s"), "--threads", "0"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "--threads 0: give a whole number of 1 or more" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_the_demo_s_first_checkpoints_have_the_recorded_hashes(tmp_path):
    """The demo's pretraining gives the same weights on any x86-64 machine: its first checkpoints (10 steps of
    the default recipe, the demo's own checkpoints: the warmup does not depend on the run's length) hash to the
    values recorded in tests/data/tiny_demo_hashes.json. This process imported torch without the pinned code
    paths, so pretrain_tiny trains in a child process that has them (`REPRODUCIBLE_ENV`)."""
    import hashlib
    import json
    import os

    import torch

    from dormant_tasks.tiny import REPRODUCIBLE_ENV

    recorded = json.loads((Path(__file__).parents[1] / "data" / "tiny_demo_hashes.json").read_text())
    if torch.__version__ != recorded["torch"]:
        pytest.skip(f"hashes recorded with torch {recorded['torch']}, this is {torch.__version__}")
    assert not all(os.environ.get(k) == v for k, v in REPRODUCIBLE_ENV.items())  # the child path is taken
    run = pretrain_tiny(tmp_path / "demo", steps=recorded["steps"], progress=False)
    got = {
        c.name: hashlib.sha256((tmp_path / "demo" / c.name / "model.safetensors").read_bytes()).hexdigest()
        for c in run.checkpoints
    }
    assert got == recorded["checkpoints"]
    assert [c.step for c in run.checkpoints] == [0, 10] and run.checkpoints[1].loss > 0
