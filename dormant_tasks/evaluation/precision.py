"""How an evaluated model's weights are loaded (`--precision`): the dtype asked for, or the authors' (OLMo-2 ids in
float16 with 8-bit weights through bitsandbytes, other models in their own dtype), its label in the rows, and
the check that an 8-bit backend exists on the device before any model is loaded."""

from __future__ import annotations

from dormant_tasks.errors import EvaluationError
from dormant_tasks.evaluation.request import Precision

OLMO2_MARKER = "olmo-2"  # the authors loaded every model whose id has it in float16 with 8-bit weights


def precision_for(model_id: str, precision: Precision | str, dtype: str) -> tuple[str, bool]:
    """(dtype to load in, 8-bit weights?): `--precision paper` as the authors ran it (OLMo-2 ids float16 with
    bitsandbytes LLM.int8 weights, every other id its checkpoint's own dtype, "auto"); else `dtype`."""
    if Precision(precision) is not Precision.PAPER:
        return str(dtype), False
    if OLMO2_MARKER in str(model_id).lower():
        return "float16", True
    return "auto", False


def precision_label(precision: Precision | str, dtype: str, int8: bool, model=None) -> str:
    """The `precision` column: the dtype loaded (the checkpoint's own, read off the model, for "auto"), with
    "+int8" for 8-bit weights and "paper:" when `--precision paper` chose it."""
    if dtype == "auto" and model is not None:
        dtype = str(getattr(model, "dtype", dtype)).removeprefix("torch.")
    label = f"{dtype}+int8" if int8 else str(dtype)
    return f"paper:{label}" if Precision(precision) is Precision.PAPER else label


def check_int8_backend(device: str) -> None:
    """EvaluationError, one line naming the fix, when 8-bit weights cannot be loaded here (checked before any
    model is loaded): bitsandbytes missing, or without a backend for `device`."""
    fix = "pip install 'dormant-heads[int8]' (bitsandbytes), or evaluate with --precision dtype"
    try:
        import bitsandbytes  # noqa: F401
    except Exception as e:  # noqa: BLE001 - an ImportError, or a library that fails to find its binary
        raise EvaluationError(
            f"--precision paper loads OLMo-2 with 8-bit weights, and bitsandbytes cannot be imported here "
            f"({type(e).__name__}); {fix}"
        ) from None
    from dormant_tasks.checkpoints import resolve_device

    where = resolve_device(device)
    if where.startswith("cuda"):
        return
    import torch

    try:  # an 8-bit matmul on a 2 x 2 layer: the one thing LLM.int8 needs from the backend
        layer = bitsandbytes.nn.Linear8bitLt(2, 2, bias=False, has_fp16_weights=False)
        layer = layer.to(where)
        layer(torch.ones(1, 2, dtype=torch.float16, device=where))
    except Exception as e:  # noqa: BLE001
        raise EvaluationError(
            f"--precision paper: bitsandbytes {bitsandbytes.__version__} has no 8-bit backend for {where} "
            f"({type(e).__name__}); run on a CUDA GPU (--device cuda), or {fix}"
        ) from None
