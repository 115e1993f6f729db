"""A checkpoint whose float16 pass is not finite is scored again in float32, automatically, and the manifest and
the report say so. The series is real: two tiny OLMo-2 checkpoints on disk, the second with layer 0's value and
output projections scaled so that its attention output overflows float16 (|x| > 65504: inf, then NaN through the
post-attention norm) while float32 holds it. Its weights are float16 values, so the upcast copy the engine scores
again is the checkpoint itself, and its scores must equal a float32 run's bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
from dormant_tasks.engine.scoring import ScoringOptions, score_texts
from dormant_tasks.errors import NonFiniteScores
from dormant_tasks.reporting.report import render_report
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.request import TrackRequest
from tests.builders.series import save_random_series
from tests.builders.track import track_steps

pytestmark = [pytest.mark.slow]  # a tiny series tracked twice and a report: ~30 s

FINE, OVERFLOWS = "stage1-step0-tokens0K", "stage1-step10-tokens20K"
FNS = ("ahon_ln", "avvn", "awft")


def _series(tmp_path, tokenizer):
    from transformers import AutoModelForCausalLM

    folder = save_random_series(tmp_path / "half-overflow", tokenizer, [FINE, OVERFLOWS])
    model = AutoModelForCausalLM.from_pretrained(folder / OVERFLOWS)
    with torch.no_grad():
        attention = model.model.layers[0].self_attn
        attention.v_proj.weight.mul_(3e4)  # weights stay inside float16's range (|w| < 1e4)
        attention.o_proj.weight.mul_(3e4)  # their product does not: the attention output reaches ~6e5
        for p in model.parameters():
            p.copy_(p.half().float())  # float16 values: upcasting the float16 copy gives back these weights
    model.save_pretrained(folder / OVERFLOWS)
    return folder


def _request(series, store, dtype):
    return TrackRequest(source=str(series), store=str(store), score_fns=FNS, dtype=dtype, report=False)


def test_a_checkpoint_whose_float16_pass_overflows_is_scored_again_in_float32(tmp_path, tiny_tokenizer):
    series = _series(tmp_path, tiny_tokenizer)
    half, tok = load_model_and_tokenizer(series / OVERFLOWS, None, "float16", "cpu")
    with pytest.raises(NonFiniteScores, match="NaN or infinite at layer 1"):  # the trap is real: float16 fails
        score_texts(half, tok, ["The cat sat on the mat."], ScoringOptions(FNS))

    store16, store32 = tmp_path / "store16", tmp_path / "store32"
    result = track_steps(_request(series, store16, "float16"))
    assert not result.failed, result.failed
    rows = {r["revision"]: r for r in read_table(store16, "checkpoints").to_pylist()}
    assert (rows[FINE]["dtype"], rows[FINE]["rescored_from"]) == ("float16", None)
    assert (rows[OVERFLOWS]["dtype"], rows[OVERFLOWS]["rescored_from"]) == ("float32", "float16")

    track_steps(_request(series, store32, "float32"))
    assert all(r["rescored_from"] is None for r in read_table(store32, "checkpoints").to_pylist())

    def scores(store):
        t = read_table(store, "head_scores").to_pylist()
        return {(r["score_fn"], r["layer"], r["head_index"]): r["score"] for r in t if r["revision"] == OVERFLOWS}

    rescored, float32 = scores(store16), scores(store32)
    assert rescored.keys() == float32.keys() and len(rescored) == len(FNS) * 2 * 4
    assert all(np.isfinite(v) or np.isnan(float32[k]) for k, v in rescored.items())
    np.testing.assert_array_equal(list(rescored.values()), [float32[k] for k in rescored])

    page = render_report(store16, series.name, tmp_path / "reports")
    html = page.index_html.read_text()
    assert "rescored in float32" in html and f"{OVERFLOWS} (its float16 pass gave NaN or infinite scores)" in html
    assert f"{FINE} (its" not in html
