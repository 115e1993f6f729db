"""The findings as one table (`findings/table.py`): the API's `findings()`, `dormant findings --format json` and
the published `findings` table are the same rows; each label names one quantity whose row carries that field's
number; a new statistic is one field of its finding's dataclass and one entry in QUANTITIES."""

from __future__ import annotations

import dataclasses
import json
import math

import pyarrow.parquet as pq
import pytest

import dormant_tasks
from dormant_tasks.findings import QUANTITIES, findings_record, findings_table, quantity, series_findings
from dormant_tasks.findings.roles import ROLE_LABELS
from dormant_tasks.findings.table import SERIES_FIELDS, table_rows
from dormant_tasks.publishing import build_publication, write_publication
from dormant_tasks.statistics import Share
from flows.cli import main
from tests.builders.stores import MODEL, store_of_two_sets


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return store_of_two_sets(tmp_path_factory.mktemp("two"), differ=True)


def plain(rows: list[dict]) -> list[dict]:
    """NaN (pandas' null) as None, numbers as floats: rows as the JSON and Parquet give them."""
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
        for r in json.loads(json.dumps(rows, default=float))
    ]


def test_the_api_the_json_and_the_published_table_are_one_table(store, tmp_path, capsys):
    f = series_findings(store, MODEL)
    table = findings_table([f]).to_pylist()
    assert plain(dormant_tasks.open_store(store)[MODEL].findings().to_dict(orient="records")) == plain(table)
    assert main(["findings", "--store", str(store), "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["table"] == [{k: v for k, v in r.items() if k not in SERIES_FIELDS} for r in table]
    assert {k: printed[k] for k in findings_record(f)} == findings_record(f)  # the nested record, kept for its readers
    assert printed["transitions"]["n_confident"] == next(r["value"] for r in table if r["quantity"] == "n_confident")
    published = write_publication(build_publication(store, MODEL, license="cc-by-4.0"), tmp_path / "pub", store)
    rows = pq.read_table(next((published / "findings").rglob("*.parquet"))).to_pylist()
    assert rows == table


def test_each_label_names_one_quantity_and_its_row_carries_that_number(store):
    f = series_findings(store, MODEL)
    labelled = [r for r in table_rows(f) if r["label"]]
    # one stage: each id once; the role shares' only where the series holds the role functions (test_role_shares.py)
    assert len({r["label"] for r in labelled}) == len(labelled) == len(QUANTITIES) - len(ROLE_LABELS)
    for r in labelled:
        x = quantity(f, f"{r['finding']}.{r['quantity']}")
        if isinstance(x, str):  # a quantity in words (the clusters used, whether confidence is reachable)
            assert r["text"] == x and r["value"] is None, r["label"]
            continue
        value = float("nan") if x is None else float(x if isinstance(x, int | float) else x.value)  # None: unknown
        assert r["value"] == (pytest.approx(value) if math.isfinite(value) else None), r["label"]  # inf: not reached
    stage = next(r for r in labelled if r["quantity"] == "stages.0.per_billion")
    assert stage["label"].endswith(f"stage {f.transitions.stages[0].stage}")  # a sibling field fills the label


def test_a_new_statistic_is_a_field_and_one_entry_in_quantities(store, monkeypatch):
    """What a new finding touches: its dataclass gains the field (here a subclass of Transitions), QUANTITIES one
    entry; the table, its label, the JSON and `quantity` follow."""
    f = series_findings(store, MODEL)
    paired = dataclasses.make_dataclass(
        "Paired", [("paired_share", Share, None)], bases=(type(f.transitions),), frozen=True
    )
    fields = {k.name: getattr(f.transitions, k.name) for k in dataclasses.fields(f.transitions) if k.init}
    g = dataclasses.replace(f, transitions=paired(**fields, paired_share=Share.of(3, 7)))
    monkeypatch.setitem(QUANTITIES, "transitions.paired_share", "mask changes significant by McNemar, BH over heads")
    row = next(r for r in table_rows(g) if r["quantity"] == "paired_share")
    assert (row["finding"], row["label"], row["k"], row["n"]) == (
        "transitions",
        QUANTITIES["transitions.paired_share"],
        3,
        7,
    )
    assert findings_record(g)["transitions"]["paired_share"]["k"] == 3
    assert quantity(g, "transitions.paired_share").n == 7


def test_the_prose_reads_its_numbers_from_the_table_by_id(store, monkeypatch):
    """The findings' paragraphs (`reporting.texts.findings_lines`) read each number through `Quantities`: every
    id they read is a series column or a quantity of the table (or a section or list of quantities), and an id
    that is none (a field the record leaves out) is refused."""
    from dormant_tasks.findings import Quantities
    from dormant_tasks.reporting.texts import findings_lines

    f = series_findings(store, MODEL)
    read: list[str] = []
    get = Quantities.__getitem__
    monkeypatch.setattr(Quantities, "__getitem__", lambda self, id: (read.append(self.section + id), get(self, id))[1])
    text = "\n".join(findings_lines(f))
    rows = {r["quantity"] if r["finding"] == "series" else f"{r['finding']}.{r['quantity']}" for r in table_rows(f)}
    assert len(set(read)) > 40 and "transitions.n_confident" in read
    for id in set(read):
        assert id in SERIES_FIELDS or any(r == id or r.startswith(id + ".") for r in rows), id
    n = quantity(f, "transitions.n_confident")
    assert f"{n} confident transition" in text
    with pytest.raises(KeyError, match="no quantity of the findings table"):
        Quantities(f)["transitions.reach"]  # the object the table summarises (reach_z, reach_note)
