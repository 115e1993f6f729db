"""Transitions and per-head histories: hand-made series and a plain-Python oracle on random series."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dormant_tasks import store as S
from dormant_tasks.errors import StoreError
from dormant_tasks.tracking.transitions import derive_transitions, head_histories
from tests.builders.rows import checkpoints_table, ckpt, score_rows, table

# ------------------------------------------------------------------------------------------ hand-made


def test_falls_dormant_at_3_and_wakes_at_5():
    cks = [ckpt("m", 1, 100 * i) for i in range(1, 7)]
    pattern = [False, False, True, True, False, False]  # head (1, 0): dormant at checkpoints 3 and 4
    rows = []
    for i, c in enumerate(cks):
        rows += score_rows(c, "ahon_ln", {(0, 0): False, (0, 1): True, (1, 0): pattern[i], (1, 1): False})
    tr = derive_transitions(table(rows)).to_pylist()
    assert [
        (r["layer"], r["head_index"], r["from_step"], r["to_step"], r["from_state"], r["to_state"]) for r in tr
    ] == [
        (1, 0, 200, 300, "active", "dormant"),
        (1, 0, 400, 500, "dormant", "active"),
    ]
    assert (
        tr[0]["revision"] == tr[0]["to_revision"] == cks[2]["revision"] and tr[0]["from_revision"] == cks[1]["revision"]
    )
    assert tr[1]["to_tokens"] == cks[4]["tokens"] and tr[1]["tau"] == 0.5 and tr[1]["model_id"] == "m"

    hist = {(r["layer"], r["head_index"]): r for r in head_histories(table(rows)).to_pylist()}
    h = hist[(1, 0)]
    assert (h["first_dormant_step"], h["first_dormant_revision"], h["n_changes"], h["final_state"]) == (
        300,
        cks[2]["revision"],
        2,
        "active",
    )
    assert h["revision"] == cks[-1]["revision"] and h["step"] == 600
    assert (hist[(0, 1)]["first_dormant_step"], hist[(0, 1)]["n_changes"], hist[(0, 1)]["final_state"]) == (
        100,
        0,
        "dormant",
    )
    never = hist[(0, 0)]
    assert never["first_dormant_step"] is None and never["first_dormant_tokens"] is None
    assert never["first_dormant_revision"] is None and (never["n_changes"], never["final_state"]) == (0, "active")


def test_order_does_not_depend_on_row_order_or_revision_names():
    """Step 900 sorts before step 1000 even though its revision name sorts after."""
    a, b = ckpt("m", 1, 1000), ckpt("m", 1, 900)
    rows = score_rows(a, "ahon", {(0, 0): True}) + score_rows(b, "ahon", {(0, 0): False})
    [t] = derive_transitions(table(rows[::-1])).to_pylist()
    assert (t["from_step"], t["to_step"], t["to_state"]) == (900, 1000, "dormant")


def test_stage2_ingredients_branch_from_the_end_of_stage1():
    s1 = [ckpt("m", 1, 10), ckpt("m", 1, 20)]
    ing1 = [ckpt("m", 2, 5, 1), ckpt("m", 2, 10, 1)]
    ing2 = [ckpt("m", 2, 5, 2), ckpt("m", 2, 10, 2)]
    state = {
        s1[0]["revision"]: False,
        s1[1]["revision"]: True,
        ing1[0]["revision"]: True,
        ing1[1]["revision"]: False,
        ing2[0]["revision"]: True,
        ing2[1]["revision"]: True,
    }
    rows = [r for c in s1 + ing1 + ing2 for r in score_rows(c, "ahon_ln", {(0, 0): state[c["revision"]]})]
    tr = derive_transitions(table(rows), checkpoints_table(s1 + ing1 + ing2)).to_pylist()
    # stage1 20 -> ingredient2 step 5 is no change (both dormant): ingredient 2 does not follow ingredient 1.
    assert [(r["from_revision"], r["to_revision"]) for r in tr] == [
        (s1[0]["revision"], s1[1]["revision"]),
        (ing1[0]["revision"], ing1[1]["revision"]),
    ]
    [h] = head_histories(table(rows), checkpoints_table(s1 + ing1 + ing2)).to_pylist()
    assert (h["n_changes"], h["final_state"], h["revision"]) == (2, "dormant", ing2[1]["revision"])
    with pytest.raises(StoreError, match="both sit at stage 2 step 5.*pass the checkpoints table"):
        derive_transitions(table(rows))


def test_refuses_to_compare_different_calibration_or_taus():
    a, b, c = ckpt("m", 1, 1), ckpt("m", 1, 2), ckpt("m", 1, 3)
    for what, changed in [
        ("calibration_id", dict(calibration_id="cal-v2")),
        ("taus_id", dict(taus_id="taus-v2")),
        ("tau", dict(tau=0.4)),
    ]:
        rows = (
            score_rows(a, "ahon_ln", {(0, 0): True})
            + score_rows(b, "ahon_ln", {(0, 0): True})
            + score_rows(c, "ahon_ln", {(0, 0): False}, **changed)
        )
        with pytest.raises(
            StoreError, match=f"cannot compare '{b['revision']}' with '{c['revision']}': {what} differs"
        ):
            derive_transitions(table(rows))


def test_nan_tau_is_the_same_tau():
    a, b = ckpt("m", 1, 1), ckpt("m", 1, 2)
    rows = score_rows(a, "aeqd_ln", {(0, 0): False}, tau=math.nan) + score_rows(
        b, "aeqd_ln", {(0, 0): False}, tau=math.nan
    )
    assert derive_transitions(table(rows)).num_rows == 0


def test_missing_or_duplicate_heads_are_refused():
    a, b = ckpt("m", 1, 1), ckpt("m", 1, 2)
    rows = score_rows(a, "ahon", {(0, 0): True, (0, 1): True}) + score_rows(b, "ahon", {(0, 0): True})
    with pytest.raises(StoreError, match=r"\(layer 0, head_index 1\) appears not at all"):
        derive_transitions(table(rows))
    with pytest.raises(StoreError, match="appears twice"):
        derive_transitions(table(rows + score_rows(b, "ahon", {(0, 1): True, (0, 0): True})))


def test_empty_input_gives_empty_tables_with_the_schema():
    empty = S.SCHEMAS["head_scores"].empty_table()
    assert derive_transitions(empty).schema == S.SCHEMAS["transitions"]
    assert head_histories(empty).num_rows == 0


# ------------------------------------------------------------------------------------------ oracle


def oracle(rows: list[dict], checkpoints: list[dict]):
    """Plain Python: walk each (model, function, head) through its checkpoints in series order."""
    ingredient = {(c["model_id"], c["revision"]): c["ingredient"] or 0 for c in checkpoints}
    state, info = {}, {}
    for r in rows:
        state[(r["model_id"], r["score_fn"], r["layer"], r["head_index"], r["revision"])] = r["dormant"]
        info[(r["model_id"], r["revision"])] = (
            r["stage"],
            ingredient[(r["model_id"], r["revision"])],
            r["step"],
            r["tokens"],
        )
    transitions, histories = set(), {}
    for model, fn, layer, head in {(r["model_id"], r["score_fn"], r["layer"], r["head_index"]) for r in rows}:
        revs = sorted(
            {r["revision"] for r in rows if (r["model_id"], r["score_fn"]) == (model, fn)},
            key=lambda rev: info[(model, rev)][:3],
        )
        changes, first = 0, None
        for i, rev in enumerate(revs):
            stage, ing = info[(model, rev)][:2]
            prev = None
            if i > 0:
                p_stage, p_ing = info[(model, revs[i - 1])][:2]
                if (p_stage, p_ing) == (stage, ing):
                    prev = revs[i - 1]
                else:  # a new branch starts from the last checkpoint of an earlier stage
                    earlier = [q for q in revs[:i] if info[(model, q)][0] < stage]
                    prev = earlier[-1] if earlier else revs[i - 1]
            now = state[(model, fn, layer, head, rev)]
            if now and first is None:
                first = rev
            if prev is not None and state[(model, fn, layer, head, prev)] != now:
                changes += 1
                transitions.add((model, fn, layer, head, prev, rev, "dormant" if now else "active"))
        histories[(model, fn, layer, head)] = (first, changes, "dormant" if now else "active", revs[-1])
    return transitions, histories


@pytest.mark.parametrize("seed", range(6))
def test_matches_the_oracle_on_random_series(seed):
    rng = random.Random(seed)
    rows, checkpoints = [], []
    for model in ("org/a", "b"):
        steps = rng.sample(range(1, 500), rng.randint(1, 9))
        cks = [ckpt(model, 1, s) for s in steps]
        if seed % 2:  # stage-2 ingredients, steps overlapping between branches
            cks += [ckpt(model, 2, s, ing) for ing in (1, 2, 3) for s in rng.sample(range(1, 50), rng.randint(1, 4))]
        checkpoints += cks
        heads = [(layer, head) for layer in range(rng.randint(1, 3)) for head in range(rng.randint(1, 4))]
        for fn in rng.sample(["ahon_ln", "awft", "lthon"], 2):
            p = rng.random()
            for c in rng.sample(cks, max(1, len(cks) - 1)):  # a function may skip a checkpoint
                rows += score_rows(c, fn, {h: rng.random() < p for h in heads})
    rng.shuffle(rows)
    hs, ck = table(rows), checkpoints_table(checkpoints)
    want_tr, want_hist = oracle(rows, checkpoints)

    got = derive_transitions(hs, ck).to_pylist()
    assert len(got) == len(want_tr)
    assert {
        (r["model_id"], r["score_fn"], r["layer"], r["head_index"], r["from_revision"], r["to_revision"], r["to_state"])
        for r in got
    } == want_tr
    for r in got:
        assert r["from_state"] != r["to_state"] and r["revision"] == r["to_revision"]

    hist = head_histories(hs, ck).to_pylist()
    assert {
        (r["model_id"], r["score_fn"], r["layer"], r["head_index"]): (
            r["first_dormant_revision"],
            r["n_changes"],
            r["final_state"],
            r["revision"],
        )
        for r in hist
    } == want_hist
    assert len(hist) == len(want_hist)


def test_derived_tables_round_trip_through_the_store(tmp_path):
    cks = [ckpt("org/m", 1, s) for s in (1, 2, 3)]
    rows = [r for i, c in enumerate(cks) for r in score_rows(c, "ahon_ln", {(0, 0): i == 1, (0, 1): i > 0})]
    tr, hist = derive_transitions(table(rows)), head_histories(table(rows))
    S.write_table(tmp_path, "transitions", tr, file_key="taus")
    S.write_table(tmp_path, "head_histories", hist, file_key="taus")
    assert S.read_table(tmp_path, "transitions").equals(tr)
    assert S.read_table(tmp_path, "head_histories").equals(hist)
    assert np.array_equal(hist.column("n_changes").to_numpy(), [2, 1])
