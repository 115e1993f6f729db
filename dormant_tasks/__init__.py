"""dormant-heads: score attention heads, mark dormant ones, track them through pretraining.

The library layer: plain functions and small dataclasses, no Prefect inside the science.
Prefect task wrappers live in `flows.tasks`; flows and the CLI live in `flows/`.

The public Python API (`dormant_tasks.api`, README "Python API"): `dormant_tasks.open_store(path)` returns a
`Store` whose series give their masks, scores, transitions, findings and evaluations as pandas DataFrames.
A track run is one call too: `dormant_tasks.track(model, store=..., **options)` (`dormant_tasks.run`: the options
are `dormant track`'s, no Prefect needed). Both are imported on first use, so `import dormant_tasks` stays light
(no pandas, pyarrow or torch).
"""

from typing import TYPE_CHECKING

from dormant_tasks.face import attach
from dormant_tasks.version import __version__ as __version__  # re-exported

if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported; see dormant_tasks/face.py)
    from dormant_tasks.api import SeriesResults as SeriesResults, Store as Store, open_store as open_store
    from dormant_tasks.run import Executor as Executor, run_track as run_track, track as track

__all__, __getattr__, __dir__ = attach(__name__)
