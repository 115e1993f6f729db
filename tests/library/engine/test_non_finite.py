"""Non-finite activations are refused, never scored: before, a NaN or infinite value reached the scores, a NaN
score is "never inactive", and the head was counted as active. The documented NaN of a ratio whose denominator
is 0 (a one-token input's aeqd_ln) still passes. Real tiny OLMo-2 models; one weight is set non-finite in memory,
past the loader's own refusal of such files (`checkpoints.loading`), as an overflow would make it mid-pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from dormant_tasks.engine.score_functions import DETERMINISTIC_IDS
from dormant_tasks.engine.scoring import ScoringOptions, score_texts, scoring_pass
from dormant_tasks.errors import ScoringError

TEXTS = ["The cat sat on the mat.", "A second, somewhat longer sentence about dormant attention heads."]


@pytest.fixture
def model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()


@pytest.mark.parametrize("fns", [DETERMINISTIC_IDS, ("ahon_ln",), ("avvn",)], ids=["all", "a-ratio-only", "avvn"])
@pytest.mark.parametrize("bad", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_a_non_finite_activation_refuses_the_pass_naming_layer_and_score(model, tiny_tokenizer, fns, bad):
    with torch.no_grad():
        model.model.layers[1].self_attn.v_proj.weight[0, 0] = bad  # value head 0 of layer 1, every token
    with pytest.raises(ScoringError) as e:
        score_texts(model, tiny_tokenizer, TEXTS, ScoringOptions(fns))
    message = str(e.value)
    assert "at layer 1" in message and "NaN or infinite" in message and "--dtype float32" in message, message
    assert "\n" not in message


def test_finite_activations_score_and_a_ratio_is_nan_only_where_its_denominator_is_0(model, tiny_tokenizer):
    scores = score_texts(
        model, tiny_tokenizer, [*TEXTS, "A"], ScoringOptions(DETERMINISTIC_IDS)
    )  # "A": a very short input too
    values = scores.values  # [input, fn, layer, head]
    fns = list(scores.score_fns)
    for f, fn in enumerate(fns):
        if not fn.endswith(("_ln", "_hn")):
            assert np.isfinite(values[:, f]).all(), fn  # a raw score of finite activations is finite
            continue
        base = values[:, fns.index(fn.removesuffix("_ln").removesuffix("_hn"))]  # [input, layer, head]
        assert not np.isinf(values[:, f]).any(), fn
        nan = np.isnan(values[:, f])
        if fn.endswith("_ln"):  # NaN exactly where the layer's mean of the raw score is 0
            np.testing.assert_array_equal(nan, np.broadcast_to((base.mean(-1) == 0)[..., None], nan.shape), fn)


def test_the_refusal_holds_for_a_pass_of_the_evaluation_too(model):
    with torch.no_grad():
        model.model.layers[0].self_attn.o_proj.weight.mul_(1e39)  # float32 overflows to inf past layer 0
    with pytest.raises(ScoringError, match="at layer 1 "):  # layer 0's own scores precede its o_proj
        scoring_pass(model, torch.tensor([[1, 2, 3, 4]]), score_fns=("ahon",))
