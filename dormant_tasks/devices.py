"""The device and dtype vocabulary, defined once (stdlib only: the CLI builds its choices from it for `--help`).

The CLI's `--device`/`--dtype`, a request's fields and `checkpoints.loading` all parse through
`parse_device` and `parse_dtype`, so one bad value is one `ConfigError` whatever the entry point.
A device is `auto` (cuda when a GPU is visible, else cpu), `cpu`, `cuda` or `cuda:N` (the N-th visible GPU).
Apple's `mps` is refused here: the score engine and the evaluation are not tested on it.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from enum import StrEnum

from dormant_tasks.errors import ConfigError, did_you_mean


class Device(StrEnum):
    AUTO = "auto"  # cuda when a GPU is visible, else cpu
    CPU = "cpu"
    CUDA = "cuda"  # the first visible GPU; `cuda:N` names another


class DType(StrEnum):
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


DEVICE_FORMS = "auto, cpu, cuda or cuda:N"
_CUDA_INDEX = re.compile(r"cuda:(\d+)")


def parse_device(value) -> Device | str:
    """A `Device`, or the string `cuda:N` (ConfigError for anything else, mps included)."""
    text = str(value.value if isinstance(value, StrEnum) else value).strip().lower()
    if text in Device._value2member_map_:
        return Device(text)
    index = _CUDA_INDEX.fullmatch(text)
    if index:
        return f"cuda:{int(index.group(1))}"
    if text == "mps":
        raise ConfigError("--device mps (Apple GPU) is not supported: use --device cpu")
    choices = [d.value for d in Device]
    raise ConfigError(f"--device {value!s}{did_you_mean(text, choices)} is not a device: use {DEVICE_FORMS}")


def parse_dtype(value) -> DType:
    text = str(value.value if isinstance(value, StrEnum) else value).strip().lower()
    if text in DType._value2member_map_:
        return DType(text)
    choices = [d.value for d in DType]
    raise ConfigError(f"--dtype {value!s}{did_you_mean(text, choices)} is not a dtype: use one of {', '.join(choices)}")


def is_cuda(device) -> bool:
    """`cuda` or `cuda:N` (not `auto`, which is decided by what is visible)."""
    return str(device.value if isinstance(device, StrEnum) else device).startswith("cuda")


# Asked of the CUDA driver in a child process: a driver initialised here would be unusable in processes
# forked later, and torch takes seconds to import.
_COUNT_GPUS = """
import ctypes
for name in ("libcuda.so.1", "libcuda.so", "libcuda.dylib", "nvcuda.dll"):
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        continue
    n = ctypes.c_int(0)
    print(n.value if lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0)
    break
else:
    print(0)
"""


@functools.cache
def visible_gpus() -> int:
    """CUDA GPUs visible to this process (CUDA_VISIBLE_DEVICES applies), in about 50 ms. 0 without a driver,
    with CUDA_VISIBLE_DEVICES empty, or when the driver fails to initialise."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return 0
    try:
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _COUNT_GPUS], capture_output=True, text=True, timeout=60
        ).stdout
        return int(out.strip() or 0)
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def check_device_available(device) -> None:
    """ConfigError when the device asks for a GPU that is not visible here (before any heavy import)."""
    device = parse_device(device)
    if not is_cuda(device):
        return
    n = visible_gpus()
    index = int(device.split(":")[1]) if ":" in device else 0
    if n == 0:
        raise ConfigError(f"--device {device}: no CUDA GPU is visible on this machine; use --device cpu (or auto)")
    if index >= n:
        raise ConfigError(
            f"--device {device}: only {n} CUDA GPU{'s are' if n != 1 else ' is'} visible "
            f"(cuda:0..cuda:{n - 1}); pick one of them or use --device cuda"
        )
