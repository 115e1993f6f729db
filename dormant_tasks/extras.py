"""The optional parts of the install (pyproject's extras): what each needs, and a one-line refusal naming the extra
when it is missing. Tracking needs none of them; `dormant evaluate` needs `eval` (lm-eval and its task data),
`--runner dask` needs `cluster` (Dask and Prefect's Dask task runner). Stdlib only: the CLI asks before any heavy
import, and nothing is imported to ask (`importlib.util.find_spec` of a top-level name runs no module)."""

from __future__ import annotations

import importlib.util

from dormant_tasks.errors import ConfigError

DISTRIBUTION = "dormant-heads"
# extra -> the top-level modules it brings that the code imports
EXTRAS = {"eval": ("lm_eval", "datasets"), "cluster": ("dask", "distributed", "prefect_dask")}


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here."""
    missing = []
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a finder that refuses the name, a half-removed package
            found = False
        if not found:
            missing.append(module)
    return missing


def require_extra(extra: str, what: str) -> None:
    """ConfigError (one line, exit 2 on the command line) when `extra` is not installed: `what` needs it."""
    missing = missing_modules(extra)
    if missing:
        raise ConfigError(
            f"{what} needs the [{extra}] extra, which this install lacks ({', '.join(missing)} not installed): "
            f"pip install '{DISTRIBUTION}[{extra}]'"
        )
