"""A series' stored evaluations (the `evaluations` table, docs/DATA_CONTRACT.md), for the parts that show them."""

from __future__ import annotations

import pyarrow as pa

from dormant_tasks.store import Table, read_table


def series_evaluations(store, model_id: str) -> pa.Table:
    """Every `evaluations` row of the series, static and dynamic (empty when it has none)."""
    return read_table(store, Table.evaluations, model_id)
