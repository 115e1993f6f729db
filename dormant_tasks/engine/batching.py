"""Right-padded batches: the one place token rows become `input_ids` / `attention_mask` tensors.

The score engine needs right padding (every row's real tokens first, then padding that no query attends to),
so both the tracker's calibration inputs and the evaluation model's lm-eval requests go through here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def padded_batch(rows: Sequence[Sequence[int]], pad_id: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids [batch, seq], attention_mask [batch, seq]) of token rows, right-padded to the longest row.
    `pad_id` None pads with 0: padding is never attended to, so its id does not change any score."""
    width = max(len(ids) for ids in rows)
    input_ids = torch.full((len(rows), width), 0 if pad_id is None else pad_id, dtype=torch.long)  # [batch, seq]
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # [batch, seq]
    for row, ids in enumerate(rows):
        input_ids[row, : len(ids)] = torch.as_tensor(list(ids), dtype=torch.long)
        mask[row, : len(ids)] = 1
    return input_ids, mask


def batch_runs(lengths: Sequence[int], batch_size: int, max_batch_tokens: int) -> list[range]:
    """Contiguous runs of input indices: a run is cut at `batch_size` inputs or before its padded size
    (inputs x longest) would exceed `max_batch_tokens`; an input longer than the budget goes alone."""
    runs, start, longest = [], 0, 0
    for i, n in enumerate(lengths):
        size = i - start
        if size and (size >= batch_size or (size + 1) * max(longest, n) > max_batch_tokens):
            runs.append(range(start, i))
            start, longest = i, 0
        longest = max(longest, n)
    runs.append(range(start, len(lengths)))
    return runs
