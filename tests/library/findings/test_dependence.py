"""Input dependence (docs/SCORES.md §7, finding 3): the cluster permutation test and the interval that inverts
it, on simulated sets with a known truth, and on a tiny OLMo-2 pretrained here and tracked on drawn sets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dormant_tasks.findings.dependence import _inverted_permutation_test, noise_floor, permutation_p
from dormant_tasks.statistics import Resampling

FAST = Resampling(resamples=20, permutations=99)


def clustered(rng, rate: np.ndarray, n_clusters: int, size: int, spread: float) -> tuple[np.ndarray, np.ndarray]:
    """bool [input, head] and int [input]: clusters of `size` inputs that share a head's logit shift (normal,
    sd `spread`) around its rate: twins or documents, whose inputs agree more with each other than with others."""
    logit = np.log(rate / (1 - rate))
    p = 1 / (1 + np.exp(-(logit + rng.normal(0, spread, (n_clusters, rate.size)))))  # [cluster, head]
    x = rng.random((n_clusters, size, rate.size)) < p[:, None, :]  # [cluster, input, head]
    return x.reshape(-1, rate.size), np.repeat(np.arange(n_clusters), size)


def test_clustered_inputs_under_a_true_null_are_rejected_at_the_nominal_rate_and_not_by_moving_single_inputs(
    capsys,
):
    """Two disjoint draws of one text (16 clusters of 4 inputs each, 48 heads), labelled as two kinds: the truth
    is the null. Moving whole clusters rejects at about 5%; the same statistic with single inputs permuted (the
    unit of the former test) rejects far more, because twins make two samples differ more than single inputs."""
    by_cluster = by_input = 0
    for rep in range(100):
        rng = np.random.default_rng(rep)
        rate = rng.uniform(0.3, 0.7, 48)
        (a, ca), (b, cb) = clustered(rng, rate, 16, 4, 2.0), clustered(rng, rate, 16, 4, 2.0)
        by_cluster += noise_floor([a, b], [ca, cb], ["a", "b"], FAST).p_value < 0.05
        by_input += noise_floor([a, b], [None, None], ["a", "b"], FAST).p_value < 0.05
    with capsys.disabled():
        print(f"\ntrue nulls rejected at 0.05 of 100: clusters moved {by_cluster}, single inputs moved {by_input}")
    assert by_cluster <= 10
    assert by_input >= 3 * max(by_cluster, 5)


def test_two_kinds_that_differ_are_found_and_the_interval_excludes_zero():
    rng = np.random.default_rng(5)
    rate = rng.uniform(0.2, 0.8, 64)
    other = np.where(np.arange(64) % 2 == 0, 1 - rate, rate)  # half the heads reversed on the other text
    (a, ca), (b, cb) = clustered(rng, rate, 32, 2, 0.5), clustered(rng, other, 32, 2, 0.5)
    nf = noise_floor([a, b], [ca, cb], ["wiki", "code"], Resampling(resamples=200, permutations=199))
    assert nf.halves and nf.n_inputs == 128 and nf.n_clusters == 64 and nf.kinds == ("wiki", "code")
    assert nf.p_value < 0.05 and nf.difference.high < 0 and nf.difference.value < -0.2
    d = nf.difference
    assert "permutation test inverted" in d.method and "clusters" in d.method and "null:" in d.method
    assert d.n_units == 64 and nf.within.n_units == 64 and "bootstrap over clusters" in nf.within.method


def test_disjoint_sets_of_one_kind_are_the_reference_when_a_kind_has_two():
    """winogrande:1, winogrande:2 and code: within = the two draws, across = each draw against code."""
    rng = np.random.default_rng(8)
    rate = rng.uniform(0.2, 0.8, 40)
    other = np.where(np.arange(40) % 2 == 0, 1 - rate, rate)
    sets = [clustered(rng, r, 24, 2, 0.5) for r in (rate, rate, other)]
    r = Resampling(resamples=100, permutations=199)
    nf = noise_floor([x for x, _ in sets], [c for _, c in sets], ["wino", "wino", "code"], r)
    assert not nf.halves and nf.p_value < 0.05 and nf.within.value > nf.across.value
    again = noise_floor([x for x, _ in sets], [c for _, c in sets], ["wino", "wino", "code"], r)
    assert again == nf  # seeded


@pytest.mark.parametrize("n", [19, 39, 40, 99, 500])
def test_the_interval_excludes_zero_exactly_when_p_is_below_005(n):
    """The inverted test against the test itself, over null distributions with ties and observed values at,
    between and beyond them."""
    rng = np.random.default_rng(n)
    for _ in range(300):
        null = np.sort(np.round(rng.normal(0, 0.1, n), 1 if rng.random() < 0.5 else 3))  # ties on half of them
        diff = float(rng.choice([null[rng.integers(n)], rng.normal(0, 0.3)]))
        p, low, high = _inverted_permutation_test(diff, null)
        below = (null <= diff).sum()
        above = (null >= diff).sum()
        assert p == permutation_p(int(below), int(above), n)
        assert (p < 0.05) == (not low <= 0 <= high), (n, diff, p, low, high)
        assert low <= diff - np.median(null) <= high or math.isclose(low, high)


def test_bad_inputs_are_refused():
    x = np.zeros((4, 3), bool)
    with pytest.raises(ValueError, match="two kinds"):
        noise_floor([x, x], [None, None], ["a", "a"])
    with pytest.raises(ValueError, match="cluster labels"):
        noise_floor([x, x], [np.zeros(3, int), None], ["a", "b"])
    with pytest.raises(ValueError, match="fewer than two clusters"):
        noise_floor([x, x], [np.zeros(4, int), None], ["a", "b"])


@pytest.mark.parametrize("differ", [False, True])
def test_series_findings_state_the_noise_floor_from_the_stored_indicators(tmp_path, differ):
    from dormant_tasks.findings.dynamics import series_findings
    from dormant_tasks.reporting.texts import findings_lines
    from tests.builders.stores import MODEL, store_of_two_sets

    f = series_findings(
        store_of_two_sets(tmp_path, differ), MODEL, resampling=Resampling(resamples=300, permutations=199)
    )
    nf = f.input_dependence.noise_floor
    assert nf is not None and nf.revision == "stage1-step20-tokens1000" and nf.n_inputs == 128
    assert nf.halves and nf.n_clusters == 128  # rows without input_clusters: every input its own cluster
    if differ:
        assert nf.difference.high < 0 and nf.p_value < 0.05
    else:
        assert nf.difference.low <= 0 <= nf.difference.high and nf.p_value >= 0.05
    text = "\n".join(findings_lines(f))
    assert f"Noise floor at {nf.revision} (128 inputs in 128 clusters" in text
    assert "permutation p = " in text and "permutations of whole clusters" in text
    assert ("Input dependent at 0.05" in text) == differ


# ------------------------------------------------------------------------------ a tiny OLMo-2, tracked


SETS = ("winogrande:1", "winogrande:2", "code:1", "wikipedia:1")


@pytest.fixture(scope="module")
def tracked(random_series, tmp_path_factory):
    """The three random tiny OLMo-2 checkpoints (2 layers x 4 heads) tracked under ahon on winogrande:1,
    winogrande:2, code:1, wikipedia:1 and two contiguous cuts of a user file (Wikipedia passages 1,001-1,128 of
    the bundled corpus), 64 texts each, with one tau for every set: the 30% quantile of the last checkpoint's
    per-input scores pooled over the sets (each set's own quantile would mark its own lowest 30% and hide the
    difference). A tiny OLMo-2 pretrained for 30 steps tells code from Wikipedia too weakly to show one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dormant_tasks.engine.scoring import ScoringOptions, score_texts
    from dormant_tasks.tracking import TrackRequest, load_calibration_sets
    from dormant_tasks.tracking.calibration import DEMO_CORPUS
    from tests.builders.track import track_steps

    root = tmp_path_factory.mktemp("dependence")
    texts = root / "passages.txt"
    texts.write_text("\n".join(DEMO_CORPUS.read_text(encoding="utf-8").splitlines()[1000:1128]) + "\n", "utf-8")
    sets = (*SETS, f"{texts}:1", f"{texts}:2")
    last = sorted(p for p in random_series.iterdir() if p.is_dir())[-1]
    model, tok = AutoModelForCausalLM.from_pretrained(last).eval(), AutoTokenizer.from_pretrained(last)
    pooled = [
        score_texts(model, tok, c.texts, ScoringOptions(("ahon",), max_tokens=32), warn_truncated=False)
        .get("ahon")
        .ravel()
        for c in load_calibration_sets(sets, 64)
    ]
    tau = float(np.quantile(np.concatenate(pooled), 0.3))
    request = TrackRequest(
        source=str(random_series),
        store=str(root / "store"),
        calibrations=sets,
        limit=64,
        score_fns=("ahon",),
        taus=(f"ahon={tau!r}",),
        max_tokens=32,
        report=False,
        device="cpu",
    )
    assert not track_steps(request).failed
    return request


def test_drawn_sets_of_one_text_are_not_input_dependent_and_code_against_wikipedia_is(tracked, capsys):
    from dormant_tasks.findings.dependence import set_noise_floor
    from dormant_tasks.tracking import open_views

    views = open_views(tracked.store, tracked.model_id)
    ids = [v.calibration_id for v in views]
    assert ids[0].startswith("winogrande-dev-draw1-seed0-64-") and ids[1].startswith("winogrande-dev-draw2-seed0-64-")
    assert ids[4].startswith("passages-cut1-64-") and ids[5].startswith("passages-cut2-64-")
    rows = {c["calibration_id"]: c for v in views for c in v.checkpoints}
    assert rows[ids[0]]["input_clusters"] is not None and len(rows[ids[0]]["input_clusters"]) == 64  # twins
    assert rows[ids[4]]["input_clusters"] is None  # a file's lines: each its own cluster
    last = views[0].revisions[-1]
    r = Resampling(resamples=200, permutations=499)
    results = {
        "winogrande:1 vs winogrande:2": set_noise_floor([views[0], views[1]], "ahon", last, r)[0],
        "passages:1 vs passages:2 (contiguous cuts)": set_noise_floor([views[4], views[5]], "ahon", last, r)[0],
        "code:1 vs wikipedia:1": set_noise_floor([views[2], views[3]], "ahon", last, r)[0],
        "all six (winogrande, code, wikipedia, passages)": set_noise_floor(views, "ahon", last, r)[0],
    }
    with capsys.disabled():
        for name, nf in results.items():
            d = nf.difference
            print(
                f"\n{name}: within {nf.within.value:.3f}, across {nf.across.value:.3f}, difference {d.value:+.3f} "
                f"(95% CI {d.low:+.3f} to {d.high:+.3f}), p = {nf.p_value:.3f}, {nf.n_clusters} clusters"
            )
    same, cuts, differ = (results[k] for k in list(results)[:3])
    assert same.halves and same.p_value >= 0.05 and same.difference.low <= 0 <= same.difference.high
    assert cuts.p_value >= 0.05
    assert differ.p_value < 0.05 and differ.difference.high < 0
    assert not results["all six (winogrande, code, wikipedia, passages)"].halves
