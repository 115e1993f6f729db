"""A checkpoint's key columns in every row it writes (`common_columns`), its commit where it is known without a
download (`known_commit`), what its work did (`CheckpointResult`, which the flow counts and the CLI prints), and a
stored result's id in the records of derived files (`result_id`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from dormant_tasks.checkpoints import Revision


def common_columns(model_id: str, revision: Revision) -> dict:
    return {
        "model_id": model_id,
        "revision": revision.name,
        "stage": revision.stage,
        "step": revision.step,
        "tokens": revision.tokens,
    }


def with_columns(table: pa.Table, columns: dict) -> pa.Table:
    for name, value in columns.items():
        table = table.append_column(name, pa.array([value] * table.num_rows))
    return table


@dataclass
class CheckpointResult:
    revision: Revision
    commit: str
    skipped: bool
    seconds: dict[str, float]
    pct_dormant: dict[str, float]  # score_fn -> % of heads dormant
    n_truncated: int = 0  # calibration inputs cut to the model's context (or --max-tokens)
    failed: str | None = None  # why it could not be downloaded, loaded or scored (recorded; a rerun retries)
    truncated: dict[str, int] = field(default_factory=dict)  # calibration set -> its inputs cut (when any)


def known_commit(revision: Revision) -> str | None:
    """The commit without loading anything: the Hub sha, or a local folder's content hash."""
    if revision.commit:
        return revision.commit
    if revision.path is not None:
        from dormant_tasks.checkpoints import local_content_hash

        return local_content_hash(Path(revision.path))
    return None


def result_id(checkpoint: dict) -> str:
    """A stored result's id in the records of derived files (transitions, histories, agreement): the manifest
    row's file_key@analyzed_at, which changes when the checkpoint is analysed again."""
    return f"{checkpoint['file_key']}@{checkpoint['analyzed_at'].isoformat()}"
