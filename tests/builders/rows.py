"""head_scores and checkpoints rows built by hand (`score_rows`: a state per head) or through the real `aggregate_heads`
(`rows_with_inactive_inputs`: per-input indicators), conformed to the store's schemas."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from dormant_tasks import store as S
from dormant_tasks.tracking.masks import Tau, aggregate_heads


def ckpt(model_id: str, stage: int, step: int, ingredient: int | None = None) -> dict:
    revision = f"stage{stage}-" + (f"ingredient{ingredient}-" if ingredient else "") + f"step{step}-tokens{step * 2}B"
    return dict(
        model_id=model_id, revision=revision, stage=stage, step=step, tokens=step * 2_000_000_000, ingredient=ingredient
    )


def score_rows(
    c: dict, score_fn: str, states: dict[tuple[int, int], bool], tau=0.5, calibration_id="cal", taus_id="taus"
) -> list[dict]:
    return [
        dict(
            model_id=c["model_id"],
            revision=c["revision"],
            stage=c["stage"],
            step=c["step"],
            tokens=c["tokens"],
            score_fn=score_fn,
            layer=layer,
            head_index=head,
            score=0.3 if d else 0.9,
            score_std=0.1,
            tau=tau,
            direction="<",
            dormant_rate=float(d),
            dormant=d,
            calibration_id=calibration_id,
            taus_id=taus_id,
        )
        for (layer, head), d in states.items()
    ]


def checkpoints_table(ckpts: list[dict], n_inputs: int = 4) -> pa.Table:
    extra = dict(
        commit="sha",
        n_layers=2,
        n_heads=2,
        calibration_id="cal",
        n_inputs=n_inputs,
        dtype="float32",
        device="cpu",
        seconds=1.0,
        analyzed_at=datetime(2025, 1, 1, tzinfo=UTC),
        code_version="0",
        taus_id="taus",
        scoring_version="1",
        input_scores_kept=False,
    )
    return S.conform([c | extra | {"file_key": c["revision"]} for c in ckpts], "checkpoints")


def table(rows: list[dict]) -> pa.Table:
    return S.conform(rows, "head_scores")


def rows_with_inactive_inputs(c: dict, inactive: list[set[int]], n: int = 128) -> list[dict]:
    """head_scores rows of one checkpoint through the real `aggregate_heads`: head h inactive on the inputs inactive[h]."""
    values = np.ones((n, 1, 1, len(inactive)))  # [input, fn, layer, head]
    for h, which in enumerate(inactive):
        values[sorted(which), 0, 0, h] = 0.0
    heads = aggregate_heads(values, ["ahon_ln"], {"ahon_ln": Tau("ahon_ln", 0.5, "<", "fixed")}).to_pylist()
    common = {k: c[k] for k in ("model_id", "revision", "stage", "step", "tokens")}
    return [common | r | {"calibration_id": "cal", "taus_id": "taus"} for r in heads]
