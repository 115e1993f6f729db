"""dormant-heads: score attention heads, mark dormant ones, track them through pretraining.

The library layer: plain functions and small dataclasses, no Prefect inside the science.
Prefect task wrappers live in `flows.tasks`; flows and the CLI live in `flows/`.
"""

__version__ = "0.1.0"
