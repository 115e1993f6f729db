"""The drift test of `evaluation/generation_adapter.py`, transformers' generation internals that `DormantLM`'s
greedy loop reads: on a tiny model whose generation_config lists two end-of-text ids and a repetition penalty,
the config, the ids and the processors the adapter returns decode exactly as `model.generate` does. A
transformers release that moves one of them fails here, naming its version."""

from __future__ import annotations

import pytest
import torch
import transformers
from transformers import GenerationConfig, RepetitionPenaltyLogitsProcessor

from dormant_tasks.evaluation.generation_adapter import eos_token_ids, generation_config, logits_processors
from tests.builders.families import make_model

DRIFT = f"transformers {transformers.__version__}: fix dormant_tasks/evaluation/generation_adapter.py"


def test_the_adapter_decodes_as_generate_does(tiny_tokenizer):
    model = make_model("olmo2", tiny_tokenizer)
    model.generation_config = GenerationConfig(eos_token_id=[7, 11], repetition_penalty=1.3, pad_token_id=0)
    kwargs = {"max_new_tokens": 6, "do_sample": False}
    config = generation_config(model, kwargs, torch.device("cpu"))
    assert eos_token_ids(config) == {7, 11}, DRIFT
    assert config.repetition_penalty == 1.3 and config.max_new_tokens == 6, DRIFT
    prompt = torch.tensor([tiny_tokenizer("The history of the city")["input_ids"]])  # [1, seq]
    processors = logits_processors(model, config, prompt.shape[1], torch.device("cpu"))
    assert any(isinstance(p, RepetitionPenaltyLogitsProcessor) for p in processors), DRIFT

    ids = prompt
    with torch.no_grad():
        for _ in range(6):  # DormantLM's loop: the whole sequence each step, the processors, the greedy token
            logits = model(input_ids=ids).logits[:, -1]  # [1, vocab]
            token = processors(ids, logits).argmax(-1, keepdim=True)  # [1, 1]
            ids = torch.cat([ids, token], dim=1)
            if int(token) in eos_token_ids(config):
                break
        want = model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)
    assert ids.tolist() == want.tolist(), DRIFT


def test_arguments_that_make_no_config_are_refused_by_transformers(tiny_tokenizer):
    model = make_model("olmo2", tiny_tokenizer)
    with pytest.raises((ValueError, TypeError)):  # DormantLM turns them into one EvaluationError line
        generation_config(model, {"max_new_tokens": -1}, torch.device("cpu"))
