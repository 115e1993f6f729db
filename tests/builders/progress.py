"""What a progress line on a pipe looks like."""

from __future__ import annotations

import re


def is_progress(line: str) -> bool:
    """A plain progress line (`dormant_tasks.progress`, on stderr when it is no terminal): a bar's
    "checkpoints: 1/4 ckpt, 3s elapsed (started)" or a waiting step's "taus of S: scoring R: 1m20s elapsed"."""
    return re.fullmatch(r".+: (\d+(/\d+)? \w+, )?(\d+h)?(\d+m)?\d+s elapsed.*", line) is not None
