"""A store worth publishing, hand-built like `stores.py` (real Parquet written through the store's own writes, the
transitions derived by the real code): two calibration sets with their per-input bits (so the findings have an
input-dependence finding and confident transitions to decide), per-input scores kept for the primary set, a stale
result under older taus that a publication must leave out, and the derived tables as the tool derives them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np

from dormant_tasks.store import read_table, write_table
from dormant_tasks.tracking import rederive
from tests.builders.stores import CAL, MODEL, T0, write_series

TOKENS = [0, 100, 1_000, 10_000]
STALE_KEY = "stale-older-taus"


def revision(c: int) -> str:
    return f"stage1-step{c * 10}-tokens{TOKENS[c]}"


def store_to_publish(root: Path, model_id: str = MODEL) -> Path:
    rng = np.random.default_rng(5)
    rate = rng.uniform(0.1, 0.9, (1, 1, 2, 8))  # [1, 1, layer, head]
    for cal, r in ((CAL, rate), ("cal-b", 1 - rate)):
        bits = rng.random((len(TOKENS), 32, 2, 8)) < r  # [checkpoint, input, layer, head]
        if cal == CAL:  # per-input scores kept: the manifest marks them when their file exists
            for c in range(len(TOKENS)):
                rows = [
                    {"model_id": model_id, "revision": revision(c), "stage": 1, "step": c * 10, "tokens": TOKENS[c]}
                    | {"input_index": i, "score_fn": "ahon_ln", "layer": layer, "head_index": head}
                    | {"score": float(0.2 if bits[c, i, layer, head] else 1.0), "calibration_id": cal}
                    for i in range(32)
                    for layer in range(2)
                    for head in range(8)
                ]
                write_table(root, "input_scores", rows, file_key=revision(c))
        mean = bits.mean(axis=1)
        write_series(
            root,
            {"ahon_ln": mean >= 0.5},
            TOKENS,
            model_id=model_id,
            rates={"ahon_ln": mean},
            n_inputs=32,
            calibration_id=cal,
            inactive={"ahon_ln": bits},
        )
    # a result of the first checkpoint under older taus: stored, never current
    heads = read_table(root, "head_scores", model_id, filters={"revision": revision(0), "calibration_id": CAL})
    stale = heads.to_pylist()
    for r in stale:
        r["taus_id"] = "older-taus"
    write_table(root, "head_scores", stale, file_key=STALE_KEY)
    row = read_table(root, "checkpoints", model_id, filters={"revision": revision(0), "calibration_id": CAL})
    old = row.to_pylist()[0] | {"taus_id": "older-taus", "analyzed_at": T0 - timedelta(days=1)}
    old |= {"commit": "sha-older", "input_scores_kept": False, "head_scores_sha256": None, "head_scores_bytes": None}
    write_table(root, "checkpoints", [old], file_key=STALE_KEY)
    rederive(root, model_id)  # transitions, head histories and the sets' agreement, as `dormant track` derives them
    return root
