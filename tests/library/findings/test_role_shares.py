"""Head roles over a tracked series: a local series tracked with the role functions on the induction probe stores
them per checkpoint, and the findings' `role_shares` (per checkpoint and per layer) equal the roles computed
directly from each checkpoint's per-input scores (`engine.roles.head_roles_of_inputs` over `engine.score_ids`)."""

from __future__ import annotations

import numpy as np
import pytest

import dormant_tasks
from dormant_tasks.engine import ROLE_IDS, ScoringOptions, score_ids
from dormant_tasks.engine.roles import head_roles_of_inputs
from dormant_tasks.findings import findings_json, findings_table, series_findings
from dormant_tasks.tracking import PROBE_SET, induction_probe

N_PROBE = 6


@pytest.fixture(scope="module")
def tracked(random_series, tmp_path_factory):
    store = tmp_path_factory.mktemp("roles") / "store"
    dormant_tasks.track(
        str(random_series),
        store=str(store),
        calibration=["winogrande", PROBE_SET],
        limit=N_PROBE,
        scores=["ahon_ln", "roles"],
        no_report=True,
    )
    return store


def test_role_shares_are_the_roles_of_each_checkpoint(tracked, random_series):
    from transformers import AutoModelForCausalLM

    f = series_findings(tracked, random_series.name)
    shares = f.role_shares
    assert shares is not None and shares.calibration_id.startswith("induction-probe-6-")
    names = [c.revision for c in shares.checkpoints]
    assert names == ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "stage1-step25-tokens51K"]
    assert [c.tokens for c in shares.checkpoints] == [0, 20_000, 51_000]
    for c in shares.checkpoints:
        model = AutoModelForCausalLM.from_pretrained(random_series / c.revision).eval()
        rows = induction_probe(N_PROBE, vocab_hi=min(10_000, model.config.vocab_size))
        scores = score_ids(model, rows, ScoringOptions(ROLE_IDS))
        want = head_roles_of_inputs({fn: scores.get(fn) for fn in ROLE_IDS})
        for role, share in want.shares().items():
            assert c.shares[role] == pytest.approx(share), (c.revision, role)
            assert c.layer_shares[role] == pytest.approx(want.layer_shares()[role])
        assert sum(c.shares.values()) == pytest.approx(1.0)


def test_role_changes_and_emergence_follow_the_shares(tracked, random_series):
    """Per pair of checkpoints and class, heads that took the role minus heads that left it is the change of its
    count; a class emerges at the first checkpoint where its share is above 0."""
    rs = series_findings(tracked, random_series.name).role_shares
    n = 2 * 4  # heads of the tiny model
    for a, b in zip(rs.checkpoints, rs.checkpoints[1:]):
        for ch in (c for c in rs.changes if c.from_revision == a.revision):
            assert ch.to_revision == b.revision
            assert ch.entered - ch.left == round(n * (b.shares[ch.role] - a.shares[ch.role]))
    assert len(rs.changes) == 6 * (len(rs.checkpoints) - 1)
    for e in rs.emergence:
        held = [c for c in rs.checkpoints if c.shares[e.role] > 0]
        assert e.revision == (held[0].revision if held else None)
        assert e.tokens == (held[0].tokens if held else None)


def test_role_shares_are_a_findings_field_and_table_rows(tracked, random_series):
    f = series_findings(tracked, random_series.name)
    record = findings_json(f)
    assert record["role_shares"]["threshold"] == 30.0
    first = record["role_shares"]["checkpoints"][0]
    assert {r["role"] for r in first["roles"]} == {"induction", "duplicate", "previous", "self", "first", "local"} | {
        "unclassified",
        "undefined",
    }
    table = findings_table([f]).to_pylist()
    rows = {r["quantity"]: r for r in table if r["finding"] == "role_shares"}
    last = f.role_shares.checkpoints[2]
    i = [r.role for r in last.roles].index("unclassified")
    row = rows[f"checkpoints.2.roles.{i}.share"]
    assert row["value"] == last.shares["unclassified"]
    assert row["label"] == "share of heads in the unclassified role at stage1-step25-tokens51K"
    assert rows[f"checkpoints.2.roles.{i}.per_layer.1"]["value"] == last.layer_shares["unclassified"][1]
    labels = [r["label"] for r in table if r["label"]]
    assert len(labels) == len(set(labels))  # each label names one quantity


def test_a_series_without_role_functions_has_no_role_shares_row(tracked, random_series, tmp_path):
    store = tmp_path / "store"
    dormant_tasks.track(str(random_series), store=str(store), limit=4, scores=["ahon_ln"], no_report=True)
    f = series_findings(store, random_series.name)
    assert f.role_shares is None and "role_shares" not in findings_json(f)
    assert not [r for r in findings_table([f]).to_pylist() if "role" in r["finding"] or "role" in r["quantity"]]
    assert np.isfinite([r["value"] for r in findings_table([f]).to_pylist() if r["value"] is not None]).all()


def test_the_report_draws_the_roles_as_roles_not_as_dormancy(tracked, random_series, tmp_path):
    """The role functions are selectivities, not dormancy verdicts against a tau: the % dormant figure and the
    summary table hold the series' dormancy functions only, the roles get their own figure, and the findings'
    intro counts the fourth paragraph."""
    from dormant_tasks.reporting.report import render_report

    result = render_report(tracked, random_series.name, tmp_path / "reports")
    summarised = [r["score_fn"] for r in result.summary_rows]
    assert "ahon_ln" in summarised and not set(summarised) & set(ROLE_IDS), summarised
    table = result.markdown[result.markdown.index("| score function | tau |") :].split("\n\n")[0]  # summary.md's
    assert "| ahon_ln |" in table and "attn_" not in table, table
    legend = result.figures["dormant_percent"][1].read_text()  # the SVG: matplotlib keeps each text as a comment
    assert "<!-- ahon_ln: " in legend and "attn_" not in legend
    html = result.index_html.read_text()
    assert "findings_roles" in result.figures
    assert "findings (1 to 3)" in html and "roles (4;" in html and "three training-dynamics" not in html
