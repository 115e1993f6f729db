"""The one place that sets a huggingface_hub internal: its offline switch, for a process that found no Hub.

huggingface_hub reads `HF_HUB_OFFLINE` once, at import, into `constants.HF_HUB_OFFLINE`, which every request of its
session (transformers' too) asks, and has no public call to switch an imported client offline; without this a
silent Hub costs every later tokenizer, config and dataset access a minute of retries.
`tests/library/test_adapters.py` checks the shape used against the installed huggingface_hub.
"""

from __future__ import annotations

import sys

from dormant_tasks.offline import set_offline

_ADAPTER = "dormant_tasks/checkpoints/hub_adapter.py"


def go_offline() -> None:
    """The Hub and datasets offline for the rest of the process (and its children)."""
    set_offline()
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is None:
        return  # it reads the variables when it is imported
    if not isinstance(getattr(constants, "HF_HUB_OFFLINE", None), bool):
        import huggingface_hub

        raise RuntimeError(
            f"huggingface_hub {huggingface_hub.__version__} keeps its offline switch elsewhere than "
            f"constants.HF_HUB_OFFLINE; fix {_ADAPTER}"
        )
    constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]
