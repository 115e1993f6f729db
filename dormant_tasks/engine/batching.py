"""Right-padded batches: the one place token rows become `input_ids` / `attention_mask` tensors.

The score engine needs right padding (every row's real tokens first, then padding that no query attends to),
so both the tracker's calibration inputs and the evaluation model's lm-eval requests go through here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

DEFAULT_MAX_BATCH_TOKENS = 65_536  # padded tokens (batch size x padded length) per forward pass
CPU_BATCH_SIZE = 8  # inputs per batch on CPU when the caller names no batch size
# On CUDA with no batch size named, batches are cut by tokens alone: 16,384 padded tokens hold 128 calibration
# sentences of ~40 tokens in one pass (a batch of 8 leaves a large GPU launch-bound) or 8 inputs of 2,048
# tokens; the float32 logits of a 100k-token vocabulary at this size take 6.5 GB.
GPU_MAX_BATCH_TOKENS = 16_384


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


def device_batching(device, batch_size: int | None, max_batch_tokens: int | None) -> tuple[int | None, int]:
    """(inputs per batch or None for no limit, padded tokens per batch) for `batch_runs`: what the caller names,
    else the device's defaults: on CUDA the token budget alone (GPU_MAX_BATCH_TOKENS), elsewhere CPU_BATCH_SIZE
    inputs and DEFAULT_MAX_BATCH_TOKENS."""
    if batch_size is None and torch.device(device).type == "cuda":
        return None, GPU_MAX_BATCH_TOKENS if max_batch_tokens is None else max_batch_tokens
    rows = CPU_BATCH_SIZE if batch_size is None else batch_size
    return rows, DEFAULT_MAX_BATCH_TOKENS if max_batch_tokens is None else max_batch_tokens


def batch_runs(lengths: Sequence[int], batch_size: int | None, max_batch_tokens: int) -> list[range]:
    """Contiguous runs of input indices: a run is cut at `batch_size` inputs (None: no limit) or before its padded
    size (inputs x longest) would exceed `max_batch_tokens`; an input longer than the budget goes alone."""
    runs, start, longest = [], 0, 0
    for i, n in enumerate(lengths):
        size = i - start
        full = batch_size is not None and size >= batch_size
        if size and (full or (size + 1) * max(longest, n) > max_batch_tokens):
            runs.append(range(start, i))
            start, longest = i, 0
        longest = max(longest, n)
    runs.append(range(start, len(lengths)))
    return runs
