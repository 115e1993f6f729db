"""Issue 62: while a new series' taus are fixed, the run names the checkpoint it scores and why ("taus of six:
scoring step0" was shown where the quantile taus' reference is the last checkpoint)."""

from __future__ import annotations

from dormant_tasks.tracking import TrackRequest, plan_series, taus_step


def test_the_taus_step_names_the_reference_of_quantile_taus_or_the_first_checkpoint_of_fixed_ones(random_series):
    quantile = TrackRequest(source=str(random_series), store="unused-store")  # default taus: some are quantiles
    plan = plan_series(quantile, cache=False)
    last, first = plan.listed[-1].name, plan.selected[0].name
    assert taus_step(quantile, plan) == f"scoring {last}, the reference checkpoint of its quantile taus"
    fixed = TrackRequest(source=str(random_series), store="unused-store", score_fns=("ahon_ln",))
    said = taus_step(fixed, plan_series(fixed, cache=False))
    assert said.startswith(f"scoring {first} first (its taus are fixed values") and last not in said
