"""The offline flags, read by one rule: the Hugging Face libraries' own (stdlib only, so the CLI's checks use it).

huggingface_hub switches off with `HF_HUB_OFFLINE`, or `TRANSFORMERS_OFFLINE` when `HF_HUB_OFFLINE` is unset or
empty, and a value is true when it is one of 1, ON, YES, TRUE in any case (nothing stripped: " 1" is false).
datasets follows `HF_DATASETS_OFFLINE` when it is set at all (even to 0), else huggingface_hub. Reading the flags
the way the libraries read them means the CLI never promises an offline run that the libraries then take
online, or the other way round; `tests/library/test_adapters.py` checks both rules against the installed
libraries.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

TRUE_VALUES = frozenset({"1", "ON", "YES", "TRUE"})  # huggingface_hub.constants.ENV_VARS_TRUE_VALUES
HUB = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
DATASETS = "HF_DATASETS_OFFLINE"


def is_true(value: str | None) -> bool:
    return value is not None and value.upper() in TRUE_VALUES


def hub_offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether huggingface_hub (and transformers, which asks it) is offline under `env` (the process's)."""
    env = os.environ if env is None else env
    return is_true(env.get(HUB[0]) or env.get(HUB[1]))


def datasets_offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether datasets (lm-eval's task data) is offline under `env`: `HF_DATASETS_OFFLINE` when set, else the Hub's."""
    env = os.environ if env is None else env
    return is_true(env[DATASETS]) if DATASETS in env else hub_offline(env)


def task_data_offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether lm-eval's task data cannot come from the Hub: datasets reads it through huggingface_hub, so either
    switch keeps it off the Hub (`--datasets auto` then means the bundled copies)."""
    return datasets_offline(env) or hub_offline(env)


def offline_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """The offline variables set to a true value, for messages ("with HF_HUB_OFFLINE set")."""
    env = os.environ if env is None else env
    return [name for name in (DATASETS, *HUB) if is_true(env.get(name))]


def set_offline(env: MutableMapping[str, str] | None = None) -> None:
    """The Hub and datasets offline for the rest of the process and its children: the variables every Hugging Face
    library reads when it is imported (one imported already: `checkpoints.go_offline`)."""
    env = os.environ if env is None else env
    env[HUB[0]] = env[DATASETS] = "1"
