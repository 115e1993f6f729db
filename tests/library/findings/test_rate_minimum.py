"""Issue 62: a rate "per billion tokens" from a run that spans fewer tokens than that is withheld, not extrapolated
("81,380 per billion tokens" from a 61K-token run); a run past the minimum states it."""

from __future__ import annotations

import math

from dormant_tasks.findings import MIN_RATE_TOKENS, findings_table, series_findings
from dormant_tasks.reporting import findings_lines
from tests.builders.stores import MODEL, known_picture, write_series


def _findings(tmp_path, scale: int):
    from tests.builders.stores import TOKENS

    tokens = [t * scale for t in TOKENS]
    store = write_series(tmp_path / f"store-{scale}", {"ahon_ln": known_picture()}, tokens)
    return series_findings(store, MODEL, "ahon_ln"), tokens


def test_a_rate_over_fewer_tokens_than_the_minimum_is_withheld(tmp_path):
    f, tokens = _findings(tmp_path, 1)
    (stage,) = f.transitions.stages
    assert 0 < stage.tokens < MIN_RATE_TOKENS
    assert math.isnan(stage.per_billion.value) and math.isnan(stage.poisson.value)
    assert "withheld" in stage.per_billion.method
    text = "\n".join(findings_lines(f, esc=str))
    assert "confident per billion tokens" not in text
    assert "no rate per billion tokens: the stage spans" in text and "under the 1B" in text
    (rate,) = [r for r in findings_table([f]).to_pylist() if r["quantity"].endswith("per_billion")]
    assert rate["value"] is None or math.isnan(rate["value"])
    assert f"at least {MIN_RATE_TOKENS:,} tokens" in rate["note"]  # the finding's note states the minimum


def test_a_rate_over_the_minimum_is_stated(tmp_path):
    f, tokens = _findings(tmp_path, 1000)  # the same picture over a thousand times the tokens
    (stage,) = f.transitions.stages
    assert stage.tokens >= MIN_RATE_TOKENS
    assert stage.poisson.value == stage.n_confident * 1e9 / stage.tokens and not math.isnan(stage.per_billion.value)
    assert "confident per billion tokens" in "\n".join(findings_lines(f, esc=str))
