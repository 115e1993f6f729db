"""dormant-heads: score attention heads, mark dormant ones, track them through pretraining.

The library layer: plain functions and small dataclasses, no Prefect inside the science.
Prefect task wrappers live in `flows.tasks`; flows and the CLI live in `flows/`.

The public Python API (`dormant_tasks.api`, README "Python API"): `dormant_tasks.open_store(path)` returns a
`Store` whose series give their masks, scores, transitions, findings and evaluations as pandas DataFrames.
It is imported on first use, so `import dormant_tasks` stays light (no pandas, pyarrow or torch).
"""

__version__ = "0.1.0"
__all__ = ["open_store", "Store", "Series"]


def __getattr__(name: str):
    if name in __all__:
        from dormant_tasks import api

        return getattr(api, name)
    raise AttributeError(f"module 'dormant_tasks' has no attribute {name!r}")
