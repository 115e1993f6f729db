"""benchmarks/findings_calibration.py: the CI guard (`--small` end to end: every NEW statistic meets its target,
the OLD ones miss where they should), its power to fail a method whose FDR is 0.10, and the docs' table written by
the full run (no drift between docs/SCORES.md, the saved result and the benchmark's sizes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.builders.benchmarks import load_benchmark
from tests.builders.benchmarks import table_value as value

REPO = Path(__file__).resolve().parents[2]


def benchmark():
    return load_benchmark("findings_calibration")


@pytest.mark.slow
def test_the_new_statistics_meet_their_targets_small():
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "findings_calibration.py"), "--small", "--seed", "0"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode in (0, 1), done.stderr
    for title in ("## 1. Transitions", "## 2. Intervals over heads", "## 3. Input dependence"):
        assert title in out
    fc = benchmark()
    per_method = len(fc.SMALL.settings) * len(fc.SMALL.checkpoints) * (1 + len(fc.MOVES)) + 1
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| NEW ")]
    # transitions by BH and BY, 2 x 4 intervals and 2 under the skewed layer effect, 1 dependence
    assert len(rows) == 2 * per_method + 8 + 2 + 1
    # every NEW row with a target passes it (or falls short of it where the docs say so); the exit status agrees
    assert not [r for r in rows if r[-1].rstrip(" |") == "FAIL"], out
    assert done.returncode == 0, out
    pooled = [line for line in out.splitlines() if line.startswith("| NEW ") and "(pooled)" in line]
    assert len(pooled) == 2 and all(line.rstrip(" |").endswith("pass") for line in pooled)
    # the comparison is real: the OLD statistics miss where the NEW ones hold
    blocks = [line for line in out.splitlines() if line.startswith("| OLD exact") and "blocks of 8" in line]
    assert max(value(line) for line in blocks if "| FDR" in line) > 0.1, out  # clusters make the old rule too sure
    old_fpr = next(line for line in out.splitlines() if line.startswith("| OLD input permutation"))
    old_cover = next(
        line for line in out.splitlines() if "OLD bootstrap heads | layer share 0.3 | coverage of the mean" in line
    )
    assert value(old_fpr) > 0.2 and value(old_cover) < 0.8


def test_the_guard_fails_a_method_whose_fdr_is_a_tenth():
    """The guard's sizes fail a method that calls 90% of the changing heads and, beside them, null heads at a rate
    that makes its false discovery rate 0.10: its pooled FDR row says FAIL, while a method at 0.03 passes."""
    fc = benchmark()

    def calls(share_false: float):
        rng = np.random.default_rng(0)

        def method(x, clusters):
            # the benchmark draws the heads' kinds; the truth is read back from the rates' generator below
            kind = method.kind
            changing = kind >= 2
            called = changing & (rng.random(kind.size) < 0.9)
            n_false = share_false / (1 - share_false) * called.sum()  # expected false calls
            nulls = np.flatnonzero(~changing)
            called[nulls] = rng.random(nulls.size) < n_false / nulls.size
            return called

        return method

    wrong, right = calls(0.10), calls(0.03)
    original = fc.trajectories

    def remembering(rng, heads):
        kind, rate = original(rng, heads)
        wrong.kind = right.kind = kind
        return kind, rate

    fc.trajectories = remembering
    rows = fc.section_transitions(fc.SMALL, 0, {"NEW wrong": wrong, "NEW right": right})
    pooled = {r.method: r for r in rows if "pooled" in r.null}
    assert pooled["NEW wrong"].value == pytest.approx(0.10, abs=0.03) and pooled["NEW wrong"].passed is False
    assert pooled["NEW right"].passed is True


def test_the_docs_table_is_the_full_runs():
    """docs/SCORES.md's marked passage is what the saved full run renders, and that run used the benchmark's
    current sizes, settings and methods (else: run it again with --write-docs)."""
    fc = benchmark()
    result = json.loads(fc.RESULT.read_text())
    sizes = fc.SMALL if result.get("run") == "small" else fc.FULL
    assert result["fingerprint"] == fc.fingerprint(sizes), "run benchmarks/findings_calibration.py --write-docs"
    body = fc.MARKED.search(fc.DOCS.read_text()).group("body")
    assert body == fc.docs_passage(result), "run benchmarks/findings_calibration.py --write-docs"


def test_the_oracle_is_the_exact_sign_test_on_each_side_of_the_change():
    """`oracle_p` against a plain-Python oracle (scipy's binomtest per side and direction, the larger p of a
    direction's two sides, twice the smaller direction), and its level under a null at the boundary."""
    from scipy import stats

    fc = benchmark()
    rng = np.random.default_rng(4)
    x = rng.random((7, 5, 12)) < rng.random((1, 5, 1))  # [checkpoint, head, input]
    clusters = np.arange(12) // 3
    before = np.linspace(0, 1, 7) < fc.CHANGE
    want = []
    for h in range(5):
        sides = []
        for side in (before, ~before):
            dev = [x[side][:, h, clusters == c].sum() - side.sum() * 3 / 2 for c in range(4)]
            up, down = sum(d > 0 for d in dev), sum(d < 0 for d in dev)

            def p(k, n=up + down):
                return stats.binomtest(k, n, 0.5, alternative="greater").pvalue if n else 1.0

            sides.append((p(up), p(down)))
        (db, ab), (da, aa) = sides
        want.append(min(1.0, 2 * min(max(db, aa), max(ab, da))))
    assert fc.oracle_p(x, clusters) == pytest.approx(want)
    # level: 2,000 heads at a rate of exactly one half, 64 independent inputs, 9 checkpoints
    null = rng.random((9, 2000, 64)) < 0.5
    assert (fc.oracle_p(null, np.arange(64)) <= 0.05).mean() <= 0.05
