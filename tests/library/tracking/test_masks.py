"""Taus and aggregation (docs/SCORES.md §3) against plain-Python oracles."""

import math

import numpy as np
import pytest

from dormant_tasks.errors import ConfigError
from dormant_tasks.tracking.masks import (
    TauSpec,
    aggregate_heads,
    parse_tau_option,
    pooled_threshold,
    resolve_taus,
    tau_specs,
    taus_id,
)


def oracle_aggregate(values, score_fns, taus):
    rows = []
    n_inputs, _, n_layers, n_heads = values.shape
    for f, fn in enumerate(score_fns):
        t = taus[fn]
        for layer in range(n_layers):
            for head in range(n_heads):
                xs = [float(values[i, f, layer, head]) for i in range(n_inputs)]
                finite = [x for x in xs if not math.isnan(x)]
                mean = sum(finite) / len(finite) if finite else math.nan
                std = math.sqrt(sum((x - mean) ** 2 for x in finite) / len(finite)) if finite else math.nan
                inactive = [(x > t.value) if t.direction == ">" else (x < t.value) for x in xs]
                rate = sum(inactive) / n_inputs
                rows.append((fn, layer, head, mean, std, rate, rate >= 0.5))
    return rows


def test_aggregate_matches_oracle_with_nan_inputs():
    rng = np.random.default_rng(3)
    score_fns = ["ahon_ln", "awft", "aeqd_ln"]
    values = rng.uniform(0, 1.2, size=(7, 3, 2, 5))
    values[0, 2] = np.nan  # a single-token input: aeqd_ln undefined everywhere
    values[:, 0, 1, 3] = np.nan  # a head whose LN denominator is always 0
    taus = resolve_taus(tau_specs(score_fns), score_fns=score_fns)
    table = aggregate_heads(values, score_fns, taus).to_pylist()
    expected = oracle_aggregate(values, score_fns, taus)
    assert len(table) == len(expected) == 3 * 2 * 5
    for row, (fn, layer, head, mean, std, rate, dormant) in zip(table, expected):
        assert (row["score_fn"], row["layer"], row["head_index"]) == (fn, layer, head)
        if math.isnan(mean):
            assert math.isnan(row["score"]) and row["dormant_rate"] == 0.0 and not row["dormant"]
        else:
            assert row["score"] == pytest.approx(mean, rel=1e-12)
            assert row["score_std"] == pytest.approx(std, rel=1e-9, abs=1e-12)
        assert row["dormant_rate"] == pytest.approx(rate)
        assert row["dormant"] == dormant
        assert row["tau"] == taus[fn].value and row["direction"] == taus[fn].direction


def test_default_taus_follow_the_spec():
    specs = tau_specs(["ahon_ln", "lthon_hn", "awft", "awft_ln", "ahon", "aeqd", "random"])
    assert specs["ahon_ln"] == TauSpec("ahon_ln", value=0.5)
    assert specs["lthon_hn"] == TauSpec("lthon_hn", value=0.5)
    assert specs["awft"] == TauSpec("awft", value=0.8)
    assert specs["awft_ln"] == TauSpec("awft_ln", value=2.0)
    assert specs["ahon"] == TauSpec("ahon", quantile=0.15)
    assert specs["aeqd"] == TauSpec("aeqd", quantile=0.15)


def test_quantile_taus_use_the_inactive_side_of_the_pooled_reference():
    rng = np.random.default_rng(0)
    score_fns = ["ahon", "awft"]
    ref = rng.uniform(size=(20, 2, 3, 4))
    taus = resolve_taus(tau_specs(score_fns, ["ahon=q0.15", "awft=q0.15"]), ref, score_fns, "stage1-step9")
    pooled_ahon = np.sort(ref[:, 0].ravel())
    # linear interpolation between order statistics, written out
    pos = 0.15 * (pooled_ahon.size - 1)
    lo = int(math.floor(pos))
    expected = pooled_ahon[lo] + (pos - lo) * (pooled_ahon[lo + 1] - pooled_ahon[lo])
    assert taus["ahon"].value == pytest.approx(expected)
    assert (ref[:, 0] < taus["ahon"].value).mean() == pytest.approx(0.15, abs=1 / 240 + 1e-9)
    assert (ref[:, 1] > taus["awft"].value).mean() == pytest.approx(0.15, abs=1 / 240 + 1e-9)
    assert taus["awft"].source == "quantile" and taus["awft"].reference_revision == "stage1-step9"


def test_pooled_threshold_ignores_nan():
    values = np.array([np.nan, 1.0, 2.0, 3.0, np.nan])
    assert pooled_threshold(values, 0.5, "<") == 2.0
    assert math.isnan(pooled_threshold(np.array([np.nan]), 0.5, "<"))


@pytest.mark.parametrize(
    "text,spec",
    [
        ("ahon_ln=0.4", TauSpec("ahon_ln", value=0.4)),
        (" ahon = q0.1 ", TauSpec("ahon", quantile=0.1)),
        ("awft=0.9", TauSpec("awft", value=0.9)),
    ],
)
def test_parse_tau(text, spec):
    assert parse_tau_option(text) == spec


@pytest.mark.parametrize(
    "text,needle",
    [
        ("ahon_ln", "cannot parse"),
        ("ahon_ln=abc", "cannot parse"),
        ("ahon_lm=0.4", 'did you mean "ahon_ln"'),
        ("ahon=q1.5", "outside [0, 1]"),
        ("ahon=nan", "cannot parse"),
    ],
)
def test_parse_tau_errors_name_the_problem(text, needle):
    with pytest.raises(ConfigError, match=None) as e:
        parse_tau_option(text)
    assert needle in str(e.value)


def test_tau_for_unscored_function_is_refused():
    with pytest.raises(ConfigError, match="not among the scored functions"):
        tau_specs(["ahon_ln"], ["awft=0.5"])


def test_taus_id_changes_with_values_only():
    a = resolve_taus(tau_specs(["ahon_ln", "awft"]))
    b = resolve_taus(tau_specs(["ahon_ln", "awft"], ["awft=0.7"]))
    assert taus_id(a) == taus_id(resolve_taus(tau_specs(["awft", "ahon_ln"])))
    assert taus_id(a) != taus_id(b)


def test_input_dependence_matches_a_per_head_oracle():
    """length_slope = np.polyfit slope of score on log2(tokens) per head (NaN inputs left out); boundary_gap =
    mean over BOS-first inputs minus mean over the others; NaN when a quantity is undefined."""
    rng = np.random.default_rng(5)
    n_inputs, fns = 9, ["ahon_ln", "awft"]
    values = rng.uniform(0, 1, size=(n_inputs, 2, 2, 3))
    values[[0, 4], 0, 1, 2] = np.nan
    values[:, 1, 0, 0] = np.nan  # a head with no defined score
    n_tokens = rng.integers(3, 200, size=n_inputs)
    first = np.array([True, False, True, True, False, False, True, False, False])
    taus = resolve_taus(tau_specs(fns), score_fns=fns)
    rows = aggregate_heads(values, fns, taus, n_tokens, first).to_pylist()
    for row in rows:
        f, layer, head = fns.index(row["score_fn"]), row["layer"], row["head_index"]
        y = values[:, f, layer, head]
        ok = ~np.isnan(y)
        if ok.sum() < 2:
            assert math.isnan(row["length_slope"]) and math.isnan(row["boundary_gap"])
            continue
        slope = np.polyfit(np.log2(n_tokens[ok]), y[ok], 1)[0]
        assert row["length_slope"] == pytest.approx(slope, rel=1e-9, abs=1e-12)
        gap = y[ok & first].mean() - y[ok & ~first].mean()
        assert row["boundary_gap"] == pytest.approx(gap, rel=1e-9, abs=1e-12)
    same_length = aggregate_heads(values, fns, taus, np.full(n_inputs, 10), np.ones(n_inputs, bool)).to_pylist()
    assert all(math.isnan(r["length_slope"]) and math.isnan(r["boundary_gap"]) for r in same_length)
    assert all(math.isnan(r["length_slope"]) for r in aggregate_heads(values, fns, taus).to_pylist())
