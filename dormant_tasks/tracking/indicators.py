"""The per-input inactive indicators of a series' head_scores (`inactive_inputs`, packed by
`statistics.pack_inputs`): unpacked into the [checkpoint, head, input] array that confident states are decided
from (`statistics.decide_states`), with the inputs' clusters the `checkpoints` table keeps; and compared at the two
checkpoints of each mask change by McNemar's exact test (`paired_p`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dormant_tasks.statistics import discordant, mcnemar_exact_p


def input_clusters(checkpoints: pa.Table | None, model_id: str) -> np.ndarray | None:
    """int [input] the clusters of the series' calibration inputs (`checkpoints.input_clusters`, the first stored
    one: every compared checkpoint shares its calibration set); None when none is stored (one input per cluster)."""
    if checkpoints is None or "input_clusters" not in checkpoints.column_names:
        return None
    mine = zip(checkpoints.column("model_id").to_pylist(), checkpoints.column("input_clusters").to_pylist())
    labels = next((c for m, c in mine if m == model_id and c is not None), None)
    return None if labels is None else np.asarray(labels, dtype=np.int64)


def unpack_rows(bits: pa.ChunkedArray | pa.Array, n_inputs: int) -> np.ndarray | None:
    """bool [row, input]: the per-input indicators of a `head_scores.inactive_inputs` column (`pack_inputs`' bits);
    None when a row keeps none or their sizes disagree with `n_inputs`."""
    arr = bits.combine_chunks() if isinstance(bits, pa.ChunkedArray) else bits
    width = (n_inputs + 7) // 8
    if arr.null_count or not len(arr):
        return None if arr.null_count else np.zeros((0, n_inputs), dtype=bool)
    arr = arr.cast(pa.binary())
    lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
    if (lengths != width).any():
        return None
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]].reshape(len(arr), width)
    return np.unpackbits(data, axis=1, bitorder="little")[:, :n_inputs].astype(bool)


def cell_indicators(
    n_inputs: np.ndarray | None, shape: tuple[int, int], bits, cell: np.ndarray, clusters: np.ndarray | None
) -> np.ndarray | None:
    """bool [checkpoint, head, input]: a dormant matrix's indicators (`bits`: its rows' `inactive_inputs`, at `cell`
    of the [checkpoint, head] matrix of `shape`); None when a row keeps none, the checkpoints' inputs differ or the
    clusters do not match them."""
    n = n_inputs
    if n is None or np.isnan(n).any() or (n != n[0]).any() or len(cell) != shape[0] * shape[1]:
        return None
    unpacked = unpack_rows(bits, int(n[0]))
    if unpacked is None or (clusters is not None and clusters.size != int(n[0])):
        return None
    inactive = np.zeros((shape[0] * shape[1], int(n[0])), dtype=bool)
    inactive[cell] = unpacked
    return inactive.reshape(*shape, int(n[0]))


def paired_p(bits, rows: np.ndarray, cell: np.ndarray, n_cells: int, frm: np.ndarray, to: np.ndarray) -> np.ndarray:
    """[transition] the exact McNemar p of the head's per-input indicators at its two checkpoints (`frm`, `to`:
    cells of the [checkpoint, head] matrix); NaN where either row keeps no indicators (or `bits` is None)."""
    out = np.full(len(frm), np.nan)
    if bits is None or not len(frm):
        return out
    row_of = np.full(n_cells, -1, dtype=np.int64)
    row_of[cell] = rows
    before = bits.take(pa.array(row_of[frm])).to_pylist()
    after = bits.take(pa.array(row_of[to])).to_pylist()
    known = [i for i, (x, y) in enumerate(zip(before, after)) if x is not None and y is not None and len(x) == len(y)]
    if known:
        b, c = np.array([discordant(before[i], after[i]) for i in known]).T  # [known transition] each
        out[known] = mcnemar_exact_p(b, c)
    return out
