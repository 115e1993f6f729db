"""`StoreFolder`: a store checked once, when opened, and passed down in place of its path."""

from __future__ import annotations

import pytest

from dormant_tasks.errors import StoreError
from dormant_tasks.store import MARKER, PUBLISHED, StoreFolder, Table, read_table, store_folder, write_table

MODEL = "test-org/tiny"


def taus_rows(tau: float = 0.5) -> list[dict]:
    common = dict(model_id=MODEL, revision="main", stage=-1, step=-1, tokens=-1)
    return [
        common | dict(score_fn="ahon_ln", tau=tau, direction="<", source="fixed", calibration_id="cal", taus_id="t1")
    ]


def test_a_store_folder_is_checked_when_opened_and_not_again(tmp_path):
    root = tmp_path / "store"
    write_table(root, Table.taus, taus_rows(), file_key="taus")
    opened = StoreFolder.open(root)
    assert (opened.root, opened.published, StoreFolder.open(opened)) == (root, False, opened)
    (root / MARKER).write_text("{not json", encoding="utf-8")  # damaged after the open
    with pytest.raises(StoreError, match="is unreadable"):
        read_table(root, Table.taus, MODEL)  # a path is checked at each read
    assert read_table(opened, Table.taus, MODEL).column("tau").to_pylist() == [0.5]  # the opened store is not


def test_opening_refuses_what_a_path_refuses(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(StoreError) as by_path:
        store_folder(missing)
    with pytest.raises(StoreError) as by_open:
        StoreFolder.open(missing)
    assert str(by_open.value) == str(by_path.value) and "does not exist" in str(by_open.value)


def test_an_opened_publication_is_still_not_written(tmp_path):
    root = tmp_path / "store"
    write_table(root, Table.taus, taus_rows(), file_key="taus")
    (root / PUBLISHED).write_text("{}", encoding="utf-8")
    opened = StoreFolder.open(root)
    assert opened.published
    with pytest.raises(StoreError) as by_path:
        write_table(root, Table.taus, taus_rows(0.7), file_key="taus")
    with pytest.raises(StoreError) as by_open:
        write_table(opened, Table.taus, taus_rows(0.7), file_key="taus")
    assert str(by_open.value) == str(by_path.value) and "read-only" in str(by_open.value)
    assert read_table(opened, Table.taus, MODEL).column("tau").to_pylist() == [0.5]
