"""The registry of score functions (`engine/score_functions.py`) is the one record of each function: the docs'
table is its rendering, the tau defaults and the default set are read from it, and the engine derives every
function from its raw statistic and normaliser (checked against the brute-force oracle in test_scoring.py and
test_triton_attention.py; here: each record's arithmetic on made-up raw statistics).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from dormant_tasks.engine.attention import ScoringSession, _final_scores
from dormant_tasks.engine.score_functions import (
    ALL_IDS,
    DEFAULT_FN,
    DETERMINISTIC_IDS,
    RAW_IDS,
    SCORE_FUNCTIONS,
    TRACKED_IDS,
    Normaliser,
    parse_score_functions,
    raw_statistics,
)
from dormant_tasks.tracking.masks import default_tau_spec

ROOT = Path(__file__).resolve().parents[3]


def docs_table() -> str:
    """docs/SCORES.md §2's table, rendered from the registry."""
    lines = [
        "| id | paper name | per-input definition | inactive if | default tau | tracked by default |",
        "|---|---|---|---|---|---|",
    ]
    for f in SCORE_FUNCTIONS.values():
        side = "u < tau (a probability `p`)" if f.raw is None else f"score {f.direction} tau"
        tau = f"`{f.direction} {f.tau}`" if f.tau.value is not None else f"quantile {f.tau.quantile:g} of the reference"
        tau = f"`p = {f.tau}`" if f.raw is None else tau
        tracked = "yes" if f.tracked else f"no: `--scores {f.group}` or name it"
        lines.append(f"| `{f.id}` | {f.paper_name} | {f.definition} | {side} | {tau} | {tracked} |")
    return "\n".join(lines)


def test_the_docs_table_is_the_registry():
    text = (ROOT / "docs" / "SCORES.md").read_text(encoding="utf-8")
    assert docs_table() in text, "docs/SCORES.md §2's table differs from the registry; paste:\n" + docs_table()


def test_every_record_reads_raw_statistics_the_engine_computes():
    from dormant_tasks.engine.score_functions import RAW_STATISTICS

    pytest.importorskip("triton")  # make setup installs it (the gpu extra): the kernel runs in its interpreter
    from dormant_tasks.engine import triton_attention as tri

    assert tuple(RAW_STATISTICS) == RAW_IDS  # each raw statistic has its record: its quantity and its reduction
    # the kernel computes every per-position quantity of the records but the value norms (read from the values) and
    # the last query's weights (from its log-sum-exp row, STAT_LSE)
    assert set(tri.STATS) == {s.quantity for s in RAW_STATISTICS.values()} - {"value_norm", "last_weights"}
    for f in SCORE_FUNCTIONS.values():
        assert (f.normaliser is None) == (f.by is None), f.id
        assert f.raw is None or f.raw in RAW_IDS, f.id
        assert f.by is None or f.by in RAW_IDS, f.id
        assert (f.tau.value is None) != (f.tau.quantile is None), f.id
        assert f.normalised == f.id.endswith(("_ln", "_hn")), f.id
    assert DEFAULT_FN in TRACKED_IDS and set(TRACKED_IDS) < set(ALL_IDS)
    paper = ("awft", "awft_ln", "aeqd", "aeqd_ln", "ftvvn", "ftvvn_ln", "avvn", "avvn_ln", "lthon", "lthon_ln")
    paper += ("lthon_hn", "ahon", "ahon_ln", "fhon", "fhon_ln")
    assert [fn for fn in DETERMINISTIC_IDS if fn in paper] == list(paper)  # the paper's 15, in its order
    assert "random" in ALL_IDS and "random" not in DETERMINISTIC_IDS
    assert raw_statistics(["lthon_hn"]) == {"lthon", "ahon"} and raw_statistics(["random"]) == set()


def test_default_taus_come_from_the_registry():
    """docs/SCORES.md §4: raw functions at quantile 0.15, _ln/_hn < 0.5, awft > 0.8, awft_ln > 2, random p = 0.15."""
    for fn, f in SCORE_FUNCTIONS.items():
        spec = default_tau_spec(fn)
        assert (spec.value, spec.quantile) == (f.tau.value, f.tau.quantile)
        if f.normalised and fn != "awft_ln":
            assert spec.value == 0.5
        elif fn in RAW_IDS and fn != "awft" and f.group == "all":
            assert spec.quantile == 0.15
    assert default_tau_spec("awft").value == 0.8 and default_tau_spec("awft_ln").value == 2.0
    assert default_tau_spec("random").value == 0.15


def test_the_default_set_leaves_out_the_functions_whose_default_taus_mark_nothing():
    assert [fn for fn in ALL_IDS if fn not in TRACKED_IDS] == ["awft", "awft_ln", "random"]
    assert parse_score_functions(None) == list(ALL_IDS)  # the engine's own default: every function
    assert parse_score_functions(None, TRACKED_IDS) == list(TRACKED_IDS)
    assert parse_score_functions(["all"], TRACKED_IDS) == list(ALL_IDS)


def test_each_record_derives_its_function_from_the_raw_statistics():
    """Every function from made-up raw per-head statistics [batch, head], as the record says: the raw value, or
    it divided by the layer mean or the same head's value of another statistic (NaN for a 0 denominator)."""
    g = torch.Generator().manual_seed(0)
    raw = {name: torch.rand(2, 3, generator=g, dtype=torch.float64) + 0.1 for name in RAW_IDS}
    raw["ftvvn"][1] = 0.0  # a zero first-token value on input 1: ftvvn_ln NaN there
    session = ScoringSession(
        lengths=torch.tensor([4, 4]), score_fns=ALL_IDS, random_u=torch.rand(2, 1, 3, dtype=torch.float64)
    )
    out = _final_scores(dict(raw), set(SCORE_FUNCTIONS), session, 0, "cpu")
    for fn, f in SCORE_FUNCTIONS.items():
        if f.raw is None:
            want = session.random_u[:, 0]
        elif f.normaliser is Normaliser.LAYER:
            want = raw[f.raw] / raw[f.by].mean(-1, keepdim=True)
        elif f.normaliser is Normaliser.HEAD:
            want = raw[f.raw] / raw[f.by]
        else:
            want = raw[fn]
        torch.testing.assert_close(out[fn], want, equal_nan=True, msg=fn)
    assert torch.isnan(out["ftvvn_ln"][1]).all() and not torch.isnan(out["ftvvn_ln"][0]).any()
    # by hand, the one function whose denominator is another statistic's layer mean
    assert out["lthon_ln"][0, 0].item() == pytest.approx(raw["lthon"][0, 0].item() / raw["ahon"][0].mean().item())
    assert math.isclose(out["lthon_hn"][1, 2].item(), raw["lthon"][1, 2].item() / raw["ahon"][1, 2].item())
