"""Issue 11: inputs are cut to the model's context (or --max-tokens) and batches fit a padded-token budget."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from dormant_tasks.engine.batching import (
    DEFAULT_MAX_BATCH_TOKENS,
    GPU_MAX_BATCH_TOKENS,
    batch_runs,
    device_batching,
    padded_batch,
)
from dormant_tasks.engine.score_functions import DETERMINISTIC_IDS
from dormant_tasks.engine.scoring import ScoringOptions, score_texts, scoring_pass
from dormant_tasks.errors import ConfigError
from dormant_tasks.tracking.calibration import DEMO_CORPUS

CONTEXT = 256


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    model.config.max_position_embeddings = CONTEXT
    return model


@pytest.fixture(scope="module")
def lines():
    return [line for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def sentences(lines, tiny_tokenizer):
    """Short texts (under 100 tokens each): sentences of the demo corpus."""
    out = [part for line in lines[:40] for part in line.split(". ") if len(part) > 20]
    return [t for t in out if len(tiny_tokenizer(t)["input_ids"]) < 100]


@pytest.fixture(scope="module")
def long_text(lines, tiny_tokenizer):
    """About 80,000 tokens of demo-corpus text."""
    ids = tiny_tokenizer(" ".join(lines[:400]))["input_ids"]
    assert len(ids) > 81_000
    return tiny_tokenizer.decode(ids[:81_000])


def test_long_text_is_cut_to_the_context_with_one_warning(model, tiny_tokenizer, long_text, caplog):
    ids = tiny_tokenizer(long_text)["input_ids"]
    assert len(ids) >= 80_000
    with caplog.at_level(logging.WARNING, logger="dormant_tasks.engine.scoring"):
        got = score_texts(model, tiny_tokenizer, [long_text])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "dormant_tasks.engine.scoring"]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "1 of 1 inputs (0)" in message and str(CONTEXT) in message and "--max-tokens" in message
    left_out = int(message.split("about ")[1].split(" tokens")[0].replace(",", ""))  # estimated from a prefix
    assert left_out == pytest.approx(len(ids) - CONTEXT, rel=0.1)
    assert got.n_truncated == 1
    np.testing.assert_array_equal(got.n_tokens, [CONTEXT])
    first = torch.tensor([ids[:CONTEXT]])  # [1, CONTEXT]
    want = scoring_pass(model, first, torch.ones_like(first), got.score_fns)
    np.testing.assert_allclose(got.values[0], want.scores[0], rtol=1e-12, atol=0)


def test_max_tokens_below_the_context(model, tiny_tokenizer, lines, sentences, caplog):
    text = " ".join(lines[:40])
    ids = tiny_tokenizer(text)["input_ids"]
    assert len(ids) > 100
    with caplog.at_level(logging.WARNING, logger="dormant_tasks.engine.scoring"):
        got = score_texts(model, tiny_tokenizer, [text, min(sentences, key=len)], ScoringOptions(max_tokens=50))
    assert got.n_truncated == 1
    assert "--max-tokens" in caplog.text and "50" in caplog.text
    first = torch.tensor([ids[:50]])
    want = scoring_pass(model, first, torch.ones_like(first), got.score_fns)
    np.testing.assert_allclose(got.values[0], want.scores[0], rtol=1e-12, atol=0)
    assert got.n_tokens[0] == 50


def test_short_texts_are_not_cut_and_do_not_warn(model, tiny_tokenizer, sentences, caplog):
    with caplog.at_level(logging.WARNING, logger="dormant_tasks.engine.scoring"):
        got = score_texts(model, tiny_tokenizer, sentences[:3])
    assert got.n_truncated == 0
    assert not [r for r in caplog.records if r.name == "dormant_tasks.engine.scoring"]


def test_long_text_runs_in_under_10x_the_time_of_a_context_sized_text(model, tiny_tokenizer, long_text):
    ids = tiny_tokenizer(long_text)["input_ids"]
    short_text = tiny_tokenizer.decode(ids[:CONTEXT])
    score_texts(model, tiny_tokenizer, [short_text])  # warm-up

    def seconds(text) -> float:
        t0 = time.perf_counter()
        score_texts(model, tiny_tokenizer, [text])
        return time.perf_counter() - t0

    # Interleaved, best of 5 each: a busy shared CPU slows both sides alike.
    times = [(seconds(short_text), seconds(long_text)) for _ in range(5)]
    t_short, t_long = min(t for t, _ in times), min(t for _, t in times)
    print(f"\n256-token text: {t_short:.4f}s; {len(ids)}-token text: {t_long:.4f}s ({t_long / t_short:.1f}x)")
    assert t_long < 10 * t_short


def test_token_budget_batching_equals_one_at_a_time_in_input_order(model, tiny_tokenizer, lines, sentences):
    long_a, long_b = " ".join(lines[:30]), lines[30]  # cut to 256 tokens / a line of its own length
    s = sentences
    texts = [s[0], long_a, s[1], s[2], long_b, s[3], s[4], s[5]]
    lengths = [min(len(tiny_tokenizer(t)["input_ids"]), CONTEXT) for t in texts]
    assert max(lengths) > 4 * min(lengths)
    alone = score_texts(model, tiny_tokenizer, texts, ScoringOptions(batch_size=1, seed=5))
    budgeted = score_texts(model, tiny_tokenizer, texts, ScoringOptions(batch_size=8, seed=5, max_batch_tokens=300))
    runs = batch_runs(lengths, 8, 300)
    assert len(runs) > 2 and all(len(r) * max(lengths[i] for i in r) <= 300 or len(r) == 1 for r in runs)
    np.testing.assert_array_equal(budgeted.n_tokens, lengths)
    np.testing.assert_array_equal(budgeted.get("random"), alone.get("random"))  # seeded by the input's own index
    # padding changes float32 rounding only (as in test_scoring's batched test); inputs alone are bit-for-bit
    np.testing.assert_allclose(budgeted.values, alone.values, rtol=1e-6, atol=0, equal_nan=True)
    for run in runs:
        if len(run) == 1:
            np.testing.assert_allclose(
                budgeted.values[run.start], alone.values[run.start], rtol=1e-12, atol=0, equal_nan=True
            )
        # each batch, put back in input order, equals the same inputs scored as one batch_size batch
        same = score_texts(
            model, tiny_tokenizer, texts[run.start : run.stop], ScoringOptions(DETERMINISTIC_IDS, batch_size=len(run))
        )
        got = budgeted.values[run.start : run.stop, : len(DETERMINISTIC_IDS)]
        assert budgeted.score_fns[: len(DETERMINISTIC_IDS)] == DETERMINISTIC_IDS
        np.testing.assert_allclose(got, same.values, rtol=1e-12, atol=0, equal_nan=True)


def test_default_budget_keeps_batch_sizebatch_runs():
    assert batch_runs([100] * 20, 8, DEFAULT_MAX_BATCH_TOKENS) == [range(0, 8), range(8, 16), range(16, 20)]
    assert batch_runs([10, 100, 10, 10, 300, 10], 8, 200) == [range(0, 2), range(2, 4), range(4, 5), range(5, 6)]


def test_gpu_default_batches_by_tokens_alone():
    """On CUDA with no batch size named, 128 calibration-sized inputs go in one pass and 2,048-token inputs 8 at a
    time; a batch size or budget the caller names, and every CPU default, are kept."""
    rows, tokens = device_batching("cuda", None, None)
    assert (rows, tokens) == (None, GPU_MAX_BATCH_TOKENS)
    assert batch_runs([40] * 128, rows, tokens) == [range(0, 128)]
    assert batch_runs([2048] * 20, rows, tokens) == [range(0, 8), range(8, 16), range(16, 20)]
    assert device_batching("cuda", 16, None) == (16, DEFAULT_MAX_BATCH_TOKENS)
    assert device_batching("cuda:1", None, 4096) == (None, 4096)
    assert device_batching("cpu", None, None) == (8, DEFAULT_MAX_BATCH_TOKENS)
    assert device_batching(torch.device("cpu"), 3, 100) == (3, 100)


@pytest.mark.parametrize("kwargs", [dict(max_tokens=0), dict(max_tokens=-3), dict(max_batch_tokens=0)])
def test_non_positive_limits_are_config_errors(model, tiny_tokenizer, sentences, kwargs):
    with pytest.raises(ConfigError):
        score_texts(model, tiny_tokenizer, sentences[:2], ScoringOptions(**kwargs))


def test_padded_batch_pads_on_the_right_with_the_pad_id():
    """The one padded-batch builder (the tracker's inputs, the evaluation model's requests and generation steps)."""
    input_ids, mask = padded_batch([[5, 6, 7], [8], [9, 10]], pad_id=3)
    assert input_ids.tolist() == [[5, 6, 7], [8, 3, 3], [9, 10, 3]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    input_ids, _ = padded_batch([(1,), (2, 4)], pad_id=None)  # a tokenizer without a pad token: 0
    assert input_ids.tolist() == [[1, 0], [2, 4]]
