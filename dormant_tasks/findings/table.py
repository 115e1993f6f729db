"""The findings as one tidy table: a row per quantity (`finding`, `quantity`, `label`, `value`, `low`, `high`,
`method`, `unit`, `n_units`, `k`, `n`, `note`, `text`). `SeriesResults.findings()`, the published `findings` table
and `dormant findings --format json` are this table; `compare`, the seed groups and the report's prose
(`Quantities`) select from it by quantity id.

A quantity's id is its path in the findings record: the finding (`emergence`, `transitions`, `input_dependence`;
`series` for the run's settings) and the field within it, list items as `name.0`, `name.1`, ... Every field of the
findings' dataclasses is a row, so a new statistic is a field of its finding's dataclass (the table and the JSON
carry it from there) and, to be named in English, one entry in QUANTITIES.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pyarrow as pa

from dormant_tasks.findings.dynamics import EARLY
from dormant_tasks.findings.roles import ROLE_LABELS
from dormant_tasks.statistics import Estimate, Share

# Each quantity's English label (the API, `compare`, the seed groups), by its id: `*` for any list item, `{field}`
# a sibling field's value. A quantity without one is in the table all the same, its label null.
QUANTITIES = {
    "emergence.pct_dormant_first": "% dormant at the first checkpoint",
    "emergence.pct_dormant_last": "% dormant at the last checkpoint",
    "emergence.n_settled": "heads settled dormant",
    "emergence.n_censored": "heads right-censored (not settled by the end)",
    "emergence.settled_median_all": "settling time, median over every head (tokens)",
    "emergence.first_fraction": "first dormant, median (fraction of tokens)",
    "emergence.settled_fraction": "settled dormant, median (fraction of tokens)",
    "emergence.early": f"dormant for good by {int(100 * EARLY)}% of tokens",
    "transitions.n_transitions": "mask changes",
    "transitions.n_confident": "confident transitions",
    "transitions.n_blips": "blips",
    "transitions.n_confident_blips": "blips with both legs confident",
    "transitions.stages.*.per_billion": "confident transitions per billion tokens, stage {stage}",
    "transitions.ever_changed": "heads whose mask changed at least once",
    "transitions.more_than_once": "heads whose mask changed more than once",
    "transitions.confidently_changed": "heads with a confident transition",
    "transitions.resolution.n_resolved": "confident transitions resolved to adjacent checkpoints",
    "transitions.reach_z": "largest |z| the input clusters allow",
    "transitions.reach_needed": "|z| the first confident state needs",
    "transitions.reach_note": "whether a state can be confident with these clusters",
    "transitions.input_clusters": "clusters of inputs",
    "transitions.paired_changes": "changes on these inputs (adjacent checkpoints, paired test)",
    "transitions.paired_heads": "heads that changed on these inputs",
    "transitions.paired_test": "the paired test",
    "input_dependence.last": "input dependence: Jaccard index at the last shared checkpoint",
    "input_dependence.all_of_any": "dormant on every set, of those on any",
    "input_dependence.noise_floor.difference": "input dependence: Jaccard across kinds minus within a kind (noise floor)",
    **ROLE_LABELS,  # only where the series holds the role functions (findings/roles.py)
}
SERIES_FIELDS = ("model_id", "score_fn", "calibration_id", "taus_id", "tau", "direction")
_S, _F, _I = pa.string(), pa.float64(), pa.int64()
# The published `findings` table (docs/PUBLISHING.md says what each column holds); `label` added last
FINDINGS_SCHEMA = pa.schema(
    [pa.field(c, _F if c == "tau" else _S, nullable=False) for c in (*SERIES_FIELDS, "finding", "quantity")]
    + [pa.field(c, t) for c, t in zip(("value", "low", "high", "method", "unit"), (_F, _F, _F, _S, _S))]
    + [pa.field(c, t) for c, t in zip(("n_units", "k", "n", "note", "text", "label"), (_I, _I, _I, _S, _S, _S))]
)
_ROW = FINDINGS_SCHEMA.names[len(SERIES_FIELDS) :]  # a quantity's columns


def quantity(f, id: str):
    """The value a quantity id names in a findings dataclass (an Estimate, a Share, a number; None: not measured)."""
    x = f
    for part in id.split("."):
        if x is None:
            return None
        x = x[int(part)] if isinstance(x, list | tuple) else getattr(x, part)
    return x


class Quantities:
    """One findings' quantities by id, for the texts that state them: `q["transitions.n_confident"]` is the value
    `quantity` reads, for an id that names a node of the findings record (a quantity of the table, or a section or
    list of them); any other id is a KeyError, so a text cannot state a number the table does not hold."""

    def __init__(self, f, section: str = "", ids: set[str] | None = None) -> None:
        self.f, self.section = f, section
        self.ids = set(_paths(findings_record(f))) if ids is None else ids

    def __getitem__(self, id: str):
        id = self.section + id
        if id not in self.ids:
            raise KeyError(f"{id!r} is no quantity of the findings table")
        return quantity(self.f, id)

    def within(self, section: str) -> Quantities:
        """The quantities of one section by their ids within it: `q.within("emergence")["n_heads"]`."""
        return Quantities(self.f, f"{self.section}{section}.", self.ids)


def _paths(x, prefix: str = ""):
    for key, value in x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ():
        path = f"{prefix}{key}"
        yield path
        yield from _paths(value, path + ".")


def _number(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)


def findings_record(f) -> dict:
    """The findings as plain JSON-ready data (`dormant findings --format json`): every number with its 95%
    interval, the method that gave it, its unit and the number of units behind it; censored values (+inf) and
    undefined ones (NaN) as null, with `value_not_reached` / `high_not_reached` or `undefined` saying which
    (`n_units` only where units were resampled). Works for any findings dataclass (a series' `Findings`, a seed
    group's `ReplicatedFindings`)."""

    def plain(x):
        if isinstance(x, Estimate | Share):
            out = {"value": _number(x.value), "low": _number(x.low), "high": _number(x.high), "method": x.method}
            out["unit"] = x.unit
            if x.n_units:  # a count or a min-max has no units of resampling behind it
                out["n_units"] = int(x.n_units)
            if isinstance(x, Share):
                out |= {"k": int(x.k), "n": int(x.n)}
            if math.isinf(x.value):  # right-censored: the series ends before it is reached
                out["value_not_reached"] = True
            elif math.isinf(x.high):
                out["high_not_reached"] = True
            if math.isnan(x.value):
                out["undefined"] = True
                if x.method.startswith("withheld"):  # a number withheld by rule (its method says which)
                    out["withheld"] = True
            elif math.isnan(x.low):
                out["interval"] = "none: fewer units than the method needs" if x.n_units else "none"
            return out
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            fields = [f for f in dataclasses.fields(x) if f.metadata.get("record", True)]  # (arrays summarised)
            fields = [f for f in fields if not (f.metadata.get("omit_none") and getattr(x, f.name) is None)]
            return {field.name: plain(getattr(x, field.name)) for field in fields}
        if isinstance(x, dict):
            return {(" vs ".join(k) if isinstance(k, tuple) else str(k)): plain(v) for k, v in x.items()}
        if isinstance(x, list | tuple | np.ndarray):
            return [plain(v) for v in (x.tolist() if isinstance(x, np.ndarray) else x)]
        if isinstance(x, np.generic):
            return plain(x.item())
        return _number(x) if isinstance(x, float) else x

    return plain(f)


def table_rows(f) -> list[dict]:
    """The table's rows of one series' `Findings`: each quantity of its record, with its label, every column named."""
    record = findings_record(f)
    rows: list[dict] = []
    for section, value in record.items():
        if isinstance(value, dict) and section != "resampling":
            rows += _flat(value, "", section, value)
        elif section not in SERIES_FIELDS:
            rows += _flat(value, section, "series", record)
    return rows


def findings_json(f, **extra) -> dict:
    """`dormant findings --format json`: the record's fields (its nested sections, kept for their readers), the
    table's rows (`table`) and `extra`."""
    return findings_record(f) | {"table": table_rows(f)} | extra


def findings_table(found) -> pa.Table:
    """The findings of one or more score functions of a series (each a `Findings`) as one table: the series'
    fields on every row, then the quantity's (the published `findings` table, `SeriesResults.findings()`)."""
    rows = [{k: getattr(f, k) for k in SERIES_FIELDS} | row for f in found for row in table_rows(f)]
    return pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA)


def _flat(value, name: str, finding: str, parent: dict) -> list[dict]:
    if isinstance(value, dict) and "method" in value and "value" in value:  # an Estimate or a Share
        note = "not reached" if value.get("value_not_reached") else "undefined" if value.get("undefined") else None
        if value.get("withheld"):
            note = value["method"]  # why, with the minimum it was held to (a rate over too few tokens)
        if value.get("high_not_reached"):
            note = "the interval's upper end not reached"
        row = {k: value.get(k) for k in ("value", "low", "high", "method", "unit", "n_units", "k", "n")}
        return [_labelled(finding, name, parent, row | {"note": note or value.get("interval")})]
    if isinstance(value, dict):
        return [row for k, v in value.items() for row in _flat(v, f"{name}.{k}" if name else str(k), finding, value)]
    if isinstance(value, list):
        return [row for i, v in enumerate(value) for row in _flat(v, f"{name}.{i}", finding, parent)]
    if isinstance(value, bool | int | float):
        return [_labelled(finding, name, parent, {"value": float(value)})]
    return [_labelled(finding, name, parent, {"text": None if value is None else str(value)})]


def _labelled(finding: str, name: str, parent: dict, row: dict) -> dict:
    template = QUANTITIES.get(re.sub(r"\.\d+(?=\.|$)", ".*", f"{finding}.{name}"))
    row |= {"finding": finding, "quantity": name, "label": template and template.format_map(parent)}
    return {c: row.get(c) for c in _ROW}
