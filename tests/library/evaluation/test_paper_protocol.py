"""The paper protocol's options: precision (8-bit OLMo-2), threshold source, their bad input.

Bad input is one stderr line naming the fix, exit 2, before any model is loaded, nothing written. The 8-bit
path runs where bitsandbytes is importable (its CPU backend does LLM.int8 too): `make setup` installs the
`int8` extra, so `make test` runs it; without bitsandbytes those tests skip, saying so. The refusal without an
8-bit backend runs everywhere: the test makes bitsandbytes unimportable in its own process.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from dormant_tasks.errors import ConfigError
from dormant_tasks.evaluation.precision import precision_for, precision_label
from dormant_tasks.evaluation.request import EvalRequest
from tests.builders.cli import Result, invoke
from tests.builders.evaluation import eval_request

REPO = Path(__file__).resolve().parents[3]


def _has_bitsandbytes() -> bool:
    try:
        import bitsandbytes  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


@pytest.fixture(scope="module")
def olmo2_named(tiny_model_dir, tmp_path_factory):
    """The tiny checkpoint in a folder whose name (its model id) marks it as OLMo-2, as the authors' rule reads."""
    folder = tmp_path_factory.mktemp("models") / "OLMo-2-tiny"
    shutil.copytree(tiny_model_dir, folder)
    return folder


def test_the_authors_precision_rule():
    assert precision_for("allenai/OLMo-2-1124-7B-Instruct", "paper", "float32") == ("float16", True)
    assert precision_for("meta-llama/Llama-3.1-8B", "paper", "float32") == ("auto", False)
    assert precision_for("allenai/OLMo-2-1124-7B", "dtype", "bfloat16") == ("bfloat16", False)
    assert precision_label("paper", "float16", True) == "paper:float16+int8"
    assert precision_label("dtype", "float32", False) == "float32"


def test_paper_precision_and_a_dtype_contradict(tmp_path):
    with pytest.raises(ConfigError, match="drop one of them"):
        EvalRequest(model=str(tmp_path), store=str(tmp_path / "s"), precision="paper", dtype="bfloat16")
    with pytest.raises(ConfigError, match="quantiles 0, .05, ..., .30 only"):
        EvalRequest(model=str(tmp_path), store=str(tmp_path / "s"), thresholds="authors", quantiles=(0.1,))


def _cli(model, store, *extra, api: str | None = None) -> Result:
    """`dormant evaluate` in-process (tests/builders/cli.py). A refusal that comes inside the flow runs it on the
    session's Prefect server (`api`); without one, the refusal must come before any flow starts."""
    r = invoke(["evaluate", "--model", model, "--store", store, *extra], cwd=REPO, env={"PREFECT_API_URL": api})
    assert api or not r.prefect_started, r.stderr[-1500:]
    return r


def _one_line_exit_2(r, needle: str, store: Path) -> None:
    lines = r.lines
    assert r.code == 2 and len(lines) == 1 and needle in lines[0], r.stderr[-1500:]
    assert lines[0].startswith("dormant evaluate: error: ")
    assert not store.exists()


@pytest.mark.slow
def test_authors_thresholds_for_a_model_they_do_not_cover(tiny_model_dir, tmp_path, prefect_api_url):
    store = tmp_path / "store"
    r = _cli(tiny_model_dir, store, "--thresholds", "authors", "--limit", "2", api=prefect_api_url)
    _one_line_exit_2(r, "the authors' thresholds cover 14 models", store)
    assert "--thresholds auto" in r.stderr


@pytest.mark.slow
def test_a_chat_rendering_for_a_model_without_a_chat_template(tiny_model_dir, tmp_path, prefect_api_url):
    store = tmp_path / "store"
    r = _cli(
        tiny_model_dir, store, "--chat-template", "on", "--rendering", "paper", "--limit", "2", api=prefect_api_url
    )
    _one_line_exit_2(r, "has no chat template", store)


def test_paper_precision_without_an_8bit_backend(olmo2_named, tmp_path, monkeypatch):
    """bitsandbytes unimportable (None in sys.modules: `import bitsandbytes` raises ImportError), as where the
    int8 extra is not installed."""
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)
    store = tmp_path / "store"
    r = _cli(olmo2_named, store, "--precision", "paper", "--limit", "2", "--device", "cpu")
    _one_line_exit_2(r, "pip install 'dormant-heads[int8]'", store)


@pytest.mark.slow
def test_paper_precision_loads_olmo2_in_8_bits(olmo2_named, torch_device):
    """The 8-bit path end to end on `torch_device` (the CPU here, CUDA in benchmarks/gpu_check.sh): Linear8bitLt
    layers, float16 activations, the sweep's base and one zeroing setting through the score engine."""
    if not _has_bitsandbytes():
        pytest.skip("bitsandbytes is not installed (pip install 'dormant-heads[int8]'): the 8-bit path is not run")
    import bitsandbytes as bnb
    import torch

    from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
    from dormant_tasks.engine.scoring import DynamicZeroing
    from dormant_tasks.evaluation.precision import check_int8_backend
    from dormant_tasks.evaluation.sweep import prepare, run_setting

    device = str(torch_device)
    check_int8_backend(device)
    dtype, int8 = precision_for(olmo2_named.name, "paper", "float32")
    model, tok = load_model_and_tokenizer(olmo2_named, None, dtype, device, int8=int8)
    assert model.dtype == torch.float16 and next(model.parameters()).device.type == torch_device.type
    assert isinstance(model.model.layers[0].self_attn.o_proj, bnb.nn.Linear8bitLt)
    prepared = prepare(
        model, tok, eval_request("winogrande", model=olmo2_named.name, shots=0, limit=6, datasets="bundled")
    )
    base = run_setting(prepared, prepared.specs[0], None)
    zeroed = run_setting(prepared, prepared.specs[0], DynamicZeroing("ahon_ln", 10.0))  # every head below 10x
    assert 0.0 <= base.accuracy <= 1.0 and base.frac_zeroed == 0.0
    assert zeroed.frac_zeroed == pytest.approx(1.0)
    assert precision_label("paper", dtype, int8, model) == "paper:float16+int8"


def test_fhon_under_8bit_weights_is_the_float16_value(olmo2_named):
    """fhon reads W_O through its Gram matrices: under LLM.int8 they come from the dequantised weights (codes x
    per-row scale / 127), so they equal the float16 model's to the quantisation error, and so does fhon itself.
    The int8 codes alone (what `.float()` of `Int8Params` gives) would be off by a different factor per row."""
    if not _has_bitsandbytes():
        pytest.skip("bitsandbytes is not installed (pip install 'dormant-heads[int8]'): the 8-bit path is not run")
    import torch

    from dormant_tasks.checkpoints.loading import load_model_and_tokenizer
    from dormant_tasks.engine.adapters import adapter_for
    from dormant_tasks.engine.attention import head_gram
    from dormant_tasks.engine.scoring import scoring_pass

    half, tok = load_model_and_tokenizer(olmo2_named, None, "float16", "cpu")
    eight, _ = load_model_and_tokenizer(olmo2_named, None, "float16", "cpu", int8=True)
    n_heads = half.config.num_attention_heads
    for layer_half, layer_eight in zip(half.model.layers, eight.model.layers):
        exact = layer_half.self_attn.o_proj.weight.float()  # [width, head*d], the float16 weights
        w = adapter_for(eight).output_weight(layer_eight.self_attn)  # [width, head*d], dequantised
        scale = exact.abs().amax(dim=1, keepdim=True)  # [width, 1] the row maxima bitsandbytes scales by
        assert ((w - exact).abs() <= scale / 254 * 1.01 + 1e-6).all()  # rounding to the nearest of 255 steps
        g_exact, g = head_gram(exact, n_heads), head_gram(w, n_heads)  # [head, d, d]
        torch.testing.assert_close(g, g_exact, rtol=0, atol=2e-2 * g_exact.abs().max().item())

    ids = tok(["The quick brown fox jumps over the lazy dog again and again."], return_tensors="pt").input_ids
    fns = ["fhon", "fhon_ln", "ahon"]
    a = scoring_pass(half, ids, score_fns=fns).scores  # [1, fn, layer, head]
    b = scoring_pass(eight, ids, score_fns=fns).scores
    # Activations also pass through 8-bit matmuls, so fhon differs as ahon does: by about a per cent.
    ahon_err = abs(b[:, 2] - a[:, 2]).max() / a[:, 2].max()
    fhon_err = abs(b[:, 0] - a[:, 0]).max() / a[:, 0].max()
    assert fhon_err < 0.05 and fhon_err < 5 * ahon_err + 0.01, (fhon_err, ahon_err)
    assert abs(b[:, 1] - a[:, 1]).max() < 0.01  # fhon_ln, the per-layer ratios (codes alone: 0.0135 here)
