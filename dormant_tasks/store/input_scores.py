"""The input-score policy of a track run: whether per-input scores are kept beside each checkpoint's mask.

Per-input scores (`input_scores`, float32: one value per input, function, layer and head) let `--retau`
re-derive masks without loading any model, at 4 bytes per value. A user sees and sets the policy
(`dormant track --input-scores auto|keep|drop`, shown in the run's output and in `dormant status`) and
can drop kept scores later (`dormant store gc`). Light on purpose: the CLI imports it to build `--help`.
"""

from __future__ import annotations

from enum import StrEnum


class InputScoresPolicy(StrEnum):
    AUTO = "auto"  # keep them while a checkpoint has at most INPUT_SCORES_AUTO_LIMIT values
    KEEP = "keep"
    DROP = "drop"


# `auto` keeps a checkpoint's per-input scores up to this many values (8 MB in the store): 128 inputs x 16
# functions x 1,024 heads (a 7B model) is 2.1 million, so a 7B series keeps none unless asked.
INPUT_SCORES_AUTO_LIMIT = 2_000_000


def keep_input_scores(policy: InputScoresPolicy, n_values: int) -> bool:
    """Whether a checkpoint with `n_values` per-input scores keeps them under `policy`."""
    if policy is InputScoresPolicy.AUTO:
        return n_values <= INPUT_SCORES_AUTO_LIMIT
    return policy is InputScoresPolicy.KEEP
