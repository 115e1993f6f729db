"""Named exceptions. The CLI turns any `DormantError` into a one-line message and exit code 2."""

from __future__ import annotations

import difflib
import errno

# OS errors that name something the user can fix (a full or read-only disk, permissions, a file where a
# folder should be); any other OSError is a bug and keeps its traceback.
USER_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST}
)


class DormantError(Exception):
    """Base class: a problem the user can fix; the message names it and the fix."""


class ConfigError(DormantError):
    """A bad option value (unknown score function, unparseable tau, bad selection ...)."""


class CheckpointError(DormantError):
    """A checkpoint source or revision that cannot be listed, downloaded or loaded."""


class ScoringError(DormantError):
    """Inputs or a model that the score engine cannot score."""


class NonFiniteScores(ScoringError):
    """A pass whose raw scores came out NaN or infinite: in float16/bfloat16 the checkpoint is scored again in
    float32 (`tracking.checkpoint_work.score_checkpoint`); in float32 the pass is refused."""


class StoreError(DormantError):
    """A Parquet store that is missing, incompatible or inconsistent with the request."""


class EvaluationError(DormantError):
    """A task, threshold or model that the intervention evaluation cannot use."""


class ReportError(DormantError):
    """A store or model id from which no report can be rendered."""


def did_you_mean(name: str, choices) -> str:
    """' (did you mean "x"?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f' (did you mean "{close[0]}"?)' if close else ""
