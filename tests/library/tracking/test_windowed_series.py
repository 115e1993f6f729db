"""A series with sliding-window layers, tracked end to end without Prefect (the flow's own steps,
`tests.builders.track`): each layer's window lands in `head_scores.sliding_window`, survives a re-tau from kept
input scores, and the report says in one line how many layers are windowed and points at their reading."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pyarrow.compute as pc
import pytest

from dormant_tasks.engine.adapters import FAMILIES
from dormant_tasks.reporting.report import render_report
from dormant_tasks.store.io import read_table
from dormant_tasks.tracking.request import TrackRequest
from tests.builders.series import save_model_series
from tests.builders.track import track_steps

pytestmark = pytest.mark.slow

# OLMo-3's branch forms (docs/CHECKPOINTS.md): no token count in the name, so the run passes --tokens-per-step
CONTRACT = Path(__file__).resolve().parents[3] / "docs" / "DATA_CONTRACT.md"
NAMES = ["stage1-step0", "stage1-step100", "stage2-step10", "stage3-step5"]
TOKENS_PER_STEP = 1024


def olmo3(tokenizer, window):
    """A tiny OLMo-3: 4 layers, the first three windowed (OLMo-3's pattern, the fourth full)."""
    from transformers import Olmo3Config, Olmo3ForCausalLM

    config = Olmo3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        max_position_embeddings=1024,
        sliding_window=window,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.15,
    )
    return Olmo3ForCausalLM(config)


def qwen2(tokenizer, window):
    """A tiny Qwen2 with its window on from layer 2 (`max_window_layers`): 2 of 4 windowed."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        sliding_window=window,
        use_sliding_window=True,
        max_window_layers=2,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.15,
    )
    return Qwen2ForCausalLM(config)


# (family, builder, window, windowed layers): OLMo-3 with a window shorter than the calibration inputs (the engine
# scores it exactly once it knows OLMo-3), Qwen2 with one longer than them (the plumbing on any engine)
CASES = {
    "olmo3, window shorter than the inputs": ("olmo3", olmo3, 8, [0, 1, 2]),
    "qwen2, window longer than the inputs": ("qwen2", qwen2, 512, [2, 3]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_windowed_series_stores_its_windows_and_the_report_says_so(case, tmp_path, tiny_tokenizer):
    family, build, window, windowed = CASES[case]
    if family not in FAMILIES:
        pytest.skip(f"the score engine does not know {family} on this branch (its adapter comes with `families`)")
    series = save_model_series(tmp_path / "tiny-windowed", tiny_tokenizer, NAMES, lambda: build(tiny_tokenizer, window))
    store = tmp_path / "store"
    request = TrackRequest(
        source=str(series),
        store=str(store),
        limit=6,
        score_fns=("awft", "aeqd", "ahon_ln"),
        tokens_per_step=TOKENS_PER_STEP,
        input_scores="keep",
        report=False,
    )
    texts = request.calibration.texts
    lengths = [len(tiny_tokenizer(t)["input_ids"]) for t in texts]
    if window < 64:  # the case's point: inputs longer than the window
        assert min(lengths) > window, lengths
    else:
        assert max(lengths) <= window, lengths

    result = track_steps(request)
    assert result.analysed == len(NAMES) and not result.failed

    ckpts = read_table(store, "checkpoints").to_pylist()
    assert sorted((c["stage"], c["step"], c["tokens"]) for c in ckpts) == [
        (1, 0, 0),
        (1, 100, 100 * TOKENS_PER_STEP),
        (2, 10, 10 * TOKENS_PER_STEP),
        (3, 5, 5 * TOKENS_PER_STEP),
    ]
    heads = read_table(store, "head_scores")
    by_layer = {}
    for layer, w in zip(heads.column("layer").to_pylist(), heads.column("sliding_window").to_pylist(), strict=True):
        by_layer.setdefault(layer, set()).add(w)
    assert by_layer == {layer: {window if layer in windowed else None} for layer in range(4)}

    # the recipe of docs/DATA_CONTRACT.md: windowed layers apart from full ones
    windowed_rows = heads.filter(pc.is_valid(heads.column("sliding_window")))
    assert sorted(set(windowed_rows.column("layer").to_pylist())) == windowed

    # a re-tau re-aggregates the kept input scores without loading a model: the windows stay
    retau = replace(request, retau=True, taus=("awft=0.5",))
    track_steps(retau)
    again = read_table(store, "head_scores")
    assert set(again.column("taus_id").to_pylist()) != set(heads.column("taus_id").to_pylist())
    windows_again = {
        (layer, w)
        for layer, w in zip(again.column("layer").to_pylist(), again.column("sliding_window").to_pylist(), strict=True)
    }
    assert windows_again == {(layer, window if layer in windowed else None) for layer in range(4)}

    # the DuckDB recipe of docs/DATA_CONTRACT.md, as written there, on this store: current taus only
    duckdb = pytest.importorskip("duckdb")
    recipe = re.search(r"Windowed layers apart from full ones.*?```sql\n(.*?)```", CONTRACT.read_text(), re.S)[1]
    rows = duckdb.sql(recipe.replace("data/store", str(store))).fetchall()  # model, step, attention, layers, pct
    assert {(r[1], r[2], r[3]) for r in rows} == {
        (step, a, n) for step in (0, 100, 10, 5) for a, n in ((str(window), len(windowed)), ("full", 4 - len(windowed)))
    }

    report = render_report(store, request.model_id, tmp_path / "reports")
    line = (
        f"{len(windowed)} of 4 layers attend over a sliding window of {window:,} tokens "
        f"(layers {', '.join(map(str, windowed))})"
    )
    assert line in report.markdown
    assert 'docs/SCORES.md, "Windowed layers"' in report.markdown
    assert line in report.index_html.read_text(encoding="utf-8")


def test_a_series_without_windows_reports_none(tmp_path, tiny_tokenizer):
    """Every layer full (OLMo-2): `sliding_window` is null throughout and the report has no windows line."""
    from tests.builders.series import save_random_series

    series = save_random_series(
        tmp_path / "tiny-olmo2", tiny_tokenizer, ["stage1-step0-tokens0", "stage1-step10-tokens10K"]
    )
    store = tmp_path / "store"
    request = TrackRequest(source=str(series), store=str(store), limit=4, score_fns=("awft",), report=False)
    track_steps(request)
    heads = read_table(store, "head_scores")
    assert heads.num_rows and heads.column("sliding_window").null_count == heads.num_rows
    report = render_report(store, request.model_id, tmp_path / "reports")
    assert "sliding window" not in report.markdown
