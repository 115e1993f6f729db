"""Seeds as the unit of replication (`findings/replication.py`): a group of series that differ only in seed, each
headline number over the seeds with Student's t interval (none below five seeds), beside each seed's own number;
two recipes compared by Welch's t interval; the CLI's text and JSON; one-line refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from dormant_tasks.errors import ConfigError
from dormant_tasks.findings import QUANTITIES, compare_seed_groups, seed_group_findings, series_findings
from dormant_tasks.findings.replication import over_seeds
from flows.cli import main
from tests.builders.stores import write_series

TOKENS = [0, 100, 200, 300, 400, 500]


def seed_store(root, n_seeds: int, share: float, seed: int = 0, prefix: str = "tiny-s"):
    """One store, `n_seeds` series of 6 checkpoints x 6 layers x 4 heads; each head falls dormant for good at a
    random checkpoint with probability `share` (another draw per seed)."""
    rng = np.random.default_rng(seed)
    names = []
    for s in range(n_seeds):
        d = np.zeros((6, 6, 4), dtype=bool)
        falls = rng.random((6, 4)) < share
        when = rng.integers(1, 4, size=(6, 4))
        for c in range(6):
            d[c] = falls & (when <= c)
        name = f"{prefix}{s}"
        write_series(root, {"ahon_ln": d}, TOKENS, model_id=name, rates={"ahon_ln": d.astype(float)}, n_inputs=128)
        names.append(name)
    return names


def test_over_seeds_is_the_t_interval_and_none_below_five_seeds():
    v = np.array([0.2, 0.25, 0.3, 0.22, 0.28, 0.26])
    e = over_seeds(v, "fraction")
    half = stats.t.ppf(0.975, 5) * v.std(ddof=1) / math.sqrt(6)
    assert (e.value, e.low, e.high, e.n_units) == pytest.approx((v.mean(), v.mean() - half, v.mean() + half, 6))
    few = over_seeds(v[:3], "fraction")
    assert few.value == pytest.approx(v[:3].mean()) and math.isnan(few.low) and few.too_few


def test_a_seed_group_states_each_number_over_seeds_beside_each_seeds_own(tmp_path):
    root = tmp_path / "store"
    names = seed_store(root, 5, 0.4)
    found = [series_findings(root, n) for n in names]
    group = seed_group_findings(found)
    assert group.model_ids == names and group.n_checkpoints == 6
    last = group.numbers[0]
    values = [f.emergence.pct_dormant_last for f in found]
    assert last.name == "% dormant at the last checkpoint" and last.over_seeds.value == pytest.approx(np.mean(values))
    assert last.over_seeds.n_units == 5 and last.over_seeds.low < np.mean(values) < last.over_seeds.high
    assert last.spread == (min(values), max(values))
    settled = group.numbers[1]
    assert [x.k for x in settled.per_seed] == [len(f.emergence.heads) for f in found]


def test_two_recipes_compare_by_welch(tmp_path):
    root = tmp_path / "store"
    a = seed_group_findings([series_findings(root, n) for n in seed_store(root, 5, 0.2, 1, "a-s")])
    b = seed_group_findings([series_findings(root, n) for n in seed_store(root, 5, 0.8, 2, "b-s")])
    (last, *_) = compare_seed_groups(a, b)
    va = [f.emergence.pct_dormant_last for f in a.per_seed]
    vb = [f.emergence.pct_dormant_last for f in b.per_seed]
    welch = stats.ttest_ind(vb, va, equal_var=False).confidence_interval(0.95)
    assert last.difference.value == pytest.approx(np.mean(vb) - np.mean(va))
    assert (last.difference.low, last.difference.high) == pytest.approx((welch.low, welch.high))
    assert last.difference.low > 0  # 80% of heads fall dormant in b, 20% in a


def test_cli_seed_group_text_json_and_refusals(tmp_path, capsys):
    root = tmp_path / "store"
    names = seed_store(root, 3, 0.5)
    assert main(["findings", "--store", str(root), "--seed-group", ",".join(names)]) == 0
    out = capsys.readouterr().out
    assert "Findings over 3 seeds of one recipe (tiny-s0, tiny-s1, tiny-s2)" in out
    assert "no interval: 3 seeds, fewer than 5" in out and "Per seed, interval over layers:" in out
    assert (
        main(["findings", "--store", str(root), "--seed-group", names[0], "--seed-group", names[1], "--format", "json"])
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    first = record["numbers"][0]
    assert (
        first["over_seeds"]["method"].startswith("Student's t interval over seeds")
        and first["over_seeds"]["n_units"] == 2
    )
    assert first["over_seeds"]["interval"].startswith("none")
    with pytest.raises(ConfigError, match="a group of seeds needs two series or more"):
        seed_group_findings([series_findings(root, names[0])])
    write_series(root, {"ahon_ln": np.zeros((3, 6, 4), bool)}, TOKENS[:3], model_id="short")
    assert main(["findings", "--store", str(root), "--seed-group", f"{names[0]},short"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "differ in their checkpoint count (6 vs 3)" in err[0]


def test_cli_compare_two_seed_groups(tmp_path, capsys):
    root = tmp_path / "store"
    a = seed_store(root, 5, 0.2, 1, "a-s")
    b = seed_store(root, 5, 0.8, 2, "b-s")
    assert main(["compare", "--store", str(root), "--seed-group", ",".join(a), "--seed-group", ",".join(b)]) == 0
    out = capsys.readouterr().out
    assert "| number | unit | a, over seeds | b, over seeds | b - a |" in out
    assert "Welch's t interval of the difference" in out
    assert main(["compare", "--store", str(root), "--seed-group", ",".join(a)]) == 2
    assert "give it twice" in capsys.readouterr().err


def test_a_seed_without_a_value_is_named_with_its_reason_and_counted(tmp_path):
    """A seed where a number is undefined (no head settled: no median settling time) or not measured (one
    calibration set: no input dependence) is left out of the mean, and named with why, never dropped silently."""
    from dormant_tasks.reporting.texts import seed_group_lines

    root = tmp_path / "store"
    names = seed_store(root, 4, 0.5) + seed_store(root, 1, 0.0, seed=1, prefix="none-s")
    group = seed_group_findings([series_findings(root, n) for n in names])
    settling = next(x for x in group.numbers if x.name == QUANTITIES["emergence.settled_fraction"])
    assert settling.n_missing == 1 and settling.missing[0][0] == "none-s0"
    assert settling.over_seeds.n_units == 4
    dependence = group.numbers[-1]
    assert dependence.n_missing == 5 and {why for _, why in dependence.missing} == {"not measured on this series"}
    text = "\n".join(seed_group_lines(group))
    assert f"1 of 5 seeds left out, without a value: none-s0 ({settling.missing[0][1]})" in text
