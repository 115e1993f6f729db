"""dormant-heads: score attention heads, mark dormant ones, track them through pretraining.

The library layer: plain functions and small dataclasses, no Prefect inside the science.
Prefect task wrappers live in `flows.tasks`; flows and the CLI live in `flows/`.

The public Python API (`dormant_tasks.api`, README "Python API"): `dormant_tasks.open_store(path)` returns a
`Store` whose series give their masks, scores, transitions, findings and evaluations as pandas DataFrames.
It is imported on first use, so `import dormant_tasks` stays light (no pandas, pyarrow or torch).
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach
from dormant_tasks.version import __version__ as __version__  # re-exported

__all__ = [
    "SeriesResults",
    "Store",
    "open_store",
]

if TYPE_CHECKING:  # where each public name lives, for type checkers and readers
    from dormant_tasks.api import SeriesResults, Store, open_store

# the same names for the interpreter: each loaded from its module on first use
__getattr__, __dir__ = attach(
    __name__,
    __all__,
    {
        "api": ["SeriesResults", "Store", "open_store"],
    },
)
