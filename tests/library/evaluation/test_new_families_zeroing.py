"""`dormant evaluate`'s zeroing on the newer families (OLMo-3, OLMoE, Qwen3, Gemma-3, SmolLM3), through lm-eval.

The oracles of tests/builders/lm_oracle.py, shared with test_evaluation.py: a plain forward of the model (its own attention, windows applied by
transformers, no score engine) on each request alone, with the zeroed heads' slices of the output projection's
input set to 0 by a forward pre-hook. The tiny models' windows (6 tokens) are shorter than every WinoGrande
request, so the windowed layers' zeroing is checked where the window matters.
"""

from __future__ import annotations

import numpy as np
import pytest

from dormant_tasks.engine.scoring import StaticZeroing
from dormant_tasks.evaluation.sweep import prepare, run_setting
from tests.builders.evaluation import eval_request
from tests.builders.families import SHORT_WINDOW, make_model
from tests.builders.lm_oracle import oracle_items, zeroing_hooks

KINDS = ["olmo3", "olmoe", "qwen3", "gemma3_text", "smollm3"]
HEADS = frozenset({(0, 1), (1, 0), (1, 3)})  # (layer, head) zeroed; the tiny models have 2 layers of 4 heads


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("kind", KINDS)
def test_static_zeroing_through_lm_eval_matches_the_hook_oracle(kind, tiny_tokenizer):
    model = make_model(kind, tiny_tokenizer, window=SHORT_WINDOW)
    windows = {getattr(layer.self_attn, "sliding_window", None) for layer in model.model.layers}
    prepared = prepare(
        model, tiny_tokenizer, eval_request("winogrande", model=f"tiny-{kind}", limit=3, batch_size=4, shots=1)
    )
    spec = prepared.loaded.spec("winogrande")
    lengths = [len(sum(prepared.lm._encode_pair(*i.args), [])) for i in prepared.instances["winogrande"]]
    if kind in ("olmo3", "gemma3_text"):  # their windowed layers really cut these requests
        assert SHORT_WINDOW in windows and min(lengths) > SHORT_WINDOW, (windows, lengths)

    base = run_setting(prepared, spec, None, log_samples=True)
    plain = oracle_items(model, prepared, "winogrande")
    for item in base.items:  # no zeroing: the engine's pass is the model's own, windows included
        np.testing.assert_allclose(item["loglikelihoods"], plain[item["doc_id"]], rtol=1e-5, atol=1e-4)

    result = run_setting(prepared, spec, StaticZeroing(HEADS), log_samples=True)
    handles = zeroing_hooks(model, HEADS)
    try:
        oracle = oracle_items(model, prepared, "winogrande")
    finally:
        for h in handles:
            h.remove()
    for item in result.items:
        np.testing.assert_allclose(item["loglikelihoods"], oracle[item["doc_id"]], rtol=1e-5, atol=1e-4)
    assert result.frac_zeroed == pytest.approx(3 / 8)
    changed = [i for i in result.items if i["loglikelihoods"] != plain[i["doc_id"]]]
    assert changed, "zeroing three of eight heads changed no log-likelihood"
