"""Hand-built stores whose pictures are known: real Parquet stores written through `dormant_tasks.store.io`, their
transitions derived by the real `derive_transitions`. Only the head scores are made up (on the right side of tau
for the states a test wants): no model is needed to draw a report or compute the findings."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from dormant_tasks.statistics.confidence import pack_inputs, wilson_interval
from dormant_tasks.store import derived_file_key
from dormant_tasks.store.io import read_table, store_folder, write_table
from dormant_tasks.tracking.transitions import FDR_KEY, derive_transitions, fdr_record, mark_blips

MODEL = "test-org/tiny-series"
CAL, TAUS = "winogrande-dev-4-abc", "taus-1"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def write_series(
    root: Path,
    dormant: dict[str, np.ndarray],
    tokens,
    *,
    model_id: str = MODEL,
    scores=None,
    taus_ids=None,
    transitions: bool = True,
    order=None,
    rates=None,
    n_inputs: int = 4,
    calibration_id: str = CAL,
    inactive=None,
    input_clusters=None,
) -> Path:
    """A store of one series. dormant: score_fn -> bool [checkpoint, layer, head]; tokens: [checkpoint].

    Checkpoint c is revision f"stage1-step{c * 10}-tokens{tokens[c]}"; files are written in `order`.
    Scores (unless given, score_fn -> float [checkpoint, layer, head]) are 0.1 + 0.01 * head for dormant
    heads and 1.0 + 0.01 * head for active ones, under the fixed tau "<" 0.5. With `rates` (score_fn ->
    dormant_rate [checkpoint, layer, head], >= 0.5 where dormant) the rows carry those rates and their Wilson
    intervals of `n_inputs` inputs; without, the rate is 0 or 1 and the interval null (unknown). The
    transitions are derived and their blips marked, as `dormant track` does. Another `calibration_id` adds that
    set to a store written with the default (primary) one: its own files, taus rows and transitions. With
    `inactive` (score_fn -> bool [checkpoint, input, layer, head]) the rows keep those per-input indicators
    (`inactive_inputs`), and `rates` must be their means; `input_clusters` (int [input]) are the inputs' clusters.
    """
    store_folder(root, create=True)
    n_ckpt, n_layers, n_heads = next(iter(dormant.values())).shape
    extra = calibration_id != CAL  # a further set: files of its own beside the primary set's
    for c in order if order is not None else range(n_ckpt):
        revision = f"stage1-step{c * 10}-tokens{tokens[c]}"
        common = {"model_id": model_id, "revision": revision, "stage": 1, "step": c * 10, "tokens": int(tokens[c])}
        taus_id = taus_ids[c] if taus_ids else TAUS
        rows = []
        for fn, states in dormant.items():
            for layer, head in itertools.product(range(n_layers), range(n_heads)):
                d = bool(states[c, layer, head])
                s = scores[fn][c, layer, head] if scores else (0.1 if d else 1.0) + 0.01 * head
                rate, low, high = float(d), None, None
                if rates is not None:
                    rate = float(rates[fn][c, layer, head])
                    assert (rate >= 0.5) == d, (fn, c, layer, head)
                    low, high = (float(x) for x in wilson_interval(round(rate * n_inputs), n_inputs))
                rows.append(
                    common
                    | {
                        "score_fn": fn,
                        "layer": layer,
                        "head_index": head,
                        "score": float(s),
                        "score_std": 0.0,
                        "tau": 0.5,
                        "direction": "<",
                        "dormant_rate": rate,
                        "dormant": d,
                        "dormant_rate_low": low,
                        "dormant_rate_high": high,
                        "inactive_inputs": None
                        if inactive is None
                        else pack_inputs(inactive[fn][c, :, layer, head])[0],
                        "calibration_id": calibration_id,
                        "taus_id": taus_id,
                    }
                )
        key = f"{revision}-{calibration_id}" if extra else revision
        write_table(root, "head_scores", rows, file_key=key)
        write_table(
            root,
            "checkpoints",
            [
                common
                | {
                    # each series its own weights (one commit shared by two series is a copy, not a seed)
                    "commit": f"sha{c}" if model_id == MODEL else f"sha{c}-{model_id}",
                    "n_layers": n_layers,
                    "n_heads": n_heads,
                    "calibration_id": calibration_id,
                    "n_inputs": n_inputs,
                    "dtype": "float32",
                    "device": "cpu",
                    "seconds": 1.5,
                    "analyzed_at": T0 + timedelta(minutes=c),
                    "code_version": "0.1.0",
                    "taus_id": taus_id,
                    "scoring_version": "1",
                }
                | ({} if input_clusters is None else {"input_clusters": [int(c) for c in input_clusters]})
            ],
            file_key=key,
        )
    kept = read_table(root, "taus", model_id).to_pylist() if extra else []
    write_table(
        root,
        "taus",
        kept
        + [
            {
                "model_id": model_id,
                "revision": "",
                "stage": 0,
                "step": 0,
                "tokens": 0,
                "score_fn": fn,
                "tau": 0.5,
                "direction": "<",
                "source": "fixed",
                "calibration_id": calibration_id,
                "taus_id": TAUS,
            }
            for fn in dormant
        ],
        file_key="taus",
    )
    if transitions:
        of_set = {"calibration_id": calibration_id}
        t = derive_transitions(
            read_table(root, "head_scores", model_id, filters=of_set),
            read_table(root, "checkpoints", model_id, filters=of_set),
        )
        t = mark_blips(t)
        key = derived_file_key("transitions", TAUS, calibration_id)
        write_table(root, "transitions", t, file_key=key, model_id=model_id, metadata={FDR_KEY: fdr_record(0.05)})
    return root


def known_picture() -> np.ndarray:
    """6 checkpoints x 2 layers x 3 heads: head (1, 2) falls dormant at checkpoint 3 and wakes at 5;
    head (0, 0) falls dormant at checkpoint 1 and stays dormant."""
    d = np.zeros((6, 2, 3), dtype=bool)
    d[3:5, 1, 2] = True
    d[1:, 0, 0] = True
    return d


TOKENS = [0, 1_000, 10_000, 100_000, 1_000_000, 4_000_000]


def with_quantile_ahon(root):
    """Replace write_series' fixed taus by a quantile tau for ahon (ahon_ln stays fixed)."""
    base = {
        "model_id": MODEL,
        "revision": "",
        "stage": 0,
        "step": 0,
        "tokens": 0,
        "tau": 0.5,
        "direction": "<",
        "calibration_id": CAL,
        "taus_id": TAUS,
    }
    write_table(
        root,
        "taus",
        [
            base
            | {
                "score_fn": "ahon",
                "source": "quantile",
                "quantile": 0.15,
                "reference_revision": "stage1-step50-tokens4000000",
            },
            base | {"score_fn": "ahon_ln", "source": "fixed"},
        ],
        file_key="taus",
    )
    return root


def store_of_two_sets(tmp_path, differ: bool):
    """Two calibration sets of 64 inputs over 3 checkpoints x 2 layers x 16 heads, each head inactive on each
    input with a fixed probability (uniform 0.2-0.8); with `differ`, every other head's is reversed on set b."""
    rng = np.random.default_rng(11)
    rate = rng.uniform(0.2, 0.8, (1, 1, 2, 16))  # [1, 1, layer, head]
    other = np.where(np.arange(16) % 2 == 0, 1 - rate, rate) if differ else rate
    root = tmp_path / "store"
    for cal, r in (("cal", rate), ("cal-b", other)):
        bits = rng.random((3, 64, 2, 16)) < r  # [checkpoint, input, layer, head]
        mean = bits.mean(axis=1)  # [checkpoint, layer, head]
        write_series(
            root,
            {"ahon_ln": mean >= 0.5},
            [0, 100, 1000],
            rates={"ahon_ln": mean},
            n_inputs=64,
            calibration_id=cal,
            inactive={"ahon_ln": bits},
        )
    return root
