"""benchmarks/cluster_designs.py: the guard of the confident-state rule on the data users bring (`--small` end to
end: NEW meets its target in every design where BEFORE, the clusters taken as given, does not), its power to fail a
method whose FDR is 0.10, and docs/SCORES.md's table written by the saved run."""

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
    return load_benchmark("cluster_designs")


@pytest.mark.slow
def test_new_meets_its_target_where_before_does_not_small():
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "cluster_designs.py"), "--small"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    new = [line for line in out.splitlines() if line.startswith("| NEW ") and "| FDR" in line]
    assert len(new) == 4 + 2 + 1 and all(line.rstrip(" |").endswith("pass") for line in new), out
    before = {
        line.split(" | ")[1]: value(line)
        for line in out.splitlines()
        if line.startswith("| BEFORE ") and "| FDR" in line
    }
    assert before["unlabelled blocks of 8 (icc 0.5)"] > 0.2  # the nulls are real at these sizes
    assert before["labels one level too fine: pairs in 7 files (icc 0.5)"] > 0.2
    assert before["10 skewed clusters of 12"] > 0.06


def test_the_guard_fails_a_method_whose_fdr_is_a_tenth():
    """The guard's sizes fail a method that calls 90% of the changing heads and null heads at a rate that makes its
    false discovery rate 0.10 (its mean row says FAIL), while one at 0.03 passes."""
    cd = benchmark()

    def calls(share_false: float):
        rng = np.random.default_rng(0)

        def method(x, labels):
            changing = method.kind >= 2
            called = changing & (rng.random(changing.size) < 0.9)
            nulls = np.flatnonzero(~changing)
            called[nulls] = rng.random(nulls.size) < share_false / (1 - share_false) * called.sum() / nulls.size
            return called

        return method

    rows = cd.section_designs(cd.SMALL, 0, {"NEW wrong": calls(0.10), "NEW right": calls(0.03)})
    mean = {r.method: r for r in rows if "mean of the rows" in r.null}
    assert mean["NEW wrong"].value == pytest.approx(0.10, abs=0.03) and mean["NEW wrong"].passed is False
    assert mean["NEW right"].passed is True


def test_the_docs_table_is_the_saved_runs():
    """docs/SCORES.md's marked passage is what the saved run renders, at the benchmark's current sizes and designs
    (else: run it again with --write-docs)."""
    cd = benchmark()
    result = json.loads(cd.RESULT.read_text())
    sizes = cd.SMALL if result["run"] == "small" else cd.FULL
    assert result["fingerprint"] == cd.fingerprint(sizes), "run benchmarks/cluster_designs.py --write-docs"
    assert cd.MARKED.search(cd.DOCS.read_text()).group("body") == cd.docs_passage(result)
