"""Interventions: the lm-eval model, tasks under the paper protocol, the threshold sweep, the metric, the leaderboard."""
