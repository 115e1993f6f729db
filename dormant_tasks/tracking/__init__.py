"""Tracking a series: calibration sets, taus and dormancy masks, transitions, agreement, the per-checkpoint work."""
