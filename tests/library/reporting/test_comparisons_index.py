"""`dormant compare` writes only the folder it is given: its record, through which the series' reports link to it,
lives in the store (issue "Nothing lost, second pass", item 2). Real stores (`write_series`), the real CLI."""

from __future__ import annotations

import hashlib
import json

from dormant_tasks.reporting.comparisons import comparisons_of
from flows.cli import main
from tests.builders.stores import MODEL, TOKENS, known_picture, write_series

OTHER = "test-org/other-series"


def test_compare_writes_nothing_beside_its_folder_and_the_report_links_to_it(tmp_path, capsys):
    store = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)
    write_series(store, {"ahon_ln": known_picture()}, TOKENS, model_id=OTHER)
    project = tmp_path / "userproj"
    project.mkdir()
    theirs = b'{"my": "own index of comparisons"}'
    (project / "comparisons.json").write_bytes(theirs)
    cmp = project / "cmp"
    assert main(["compare", "--store", str(store), "--model", f"{MODEL},{OTHER}", "--reports-dir", str(cmp)]) == 0
    assert sorted(p.name for p in project.iterdir()) == ["cmp", "comparisons.json"]  # no lock, no temp file
    assert (project / "comparisons.json").read_bytes() == theirs
    index = json.loads((store / "comparisons.json").read_text())
    assert index == [{"folder": str(cmp.resolve()), "models": [MODEL, OTHER]}]

    capsys.readouterr()
    report = tmp_path / "elsewhere" / "mine"  # any folder: the link is relative to it
    assert main(["report", "--store", str(store), "--model", MODEL, "--reports-dir", str(report)]) == 0
    html = (report / "index.html").read_text(encoding="utf-8")
    assert '<a href="../../userproj/cmp/index.html">' in html
    assert comparisons_of(store, "test-org/third", report) == []

    # a comparison whose page is gone is not linked; an index an older release left beside it is not read
    (cmp / "index.html").unlink()
    assert comparisons_of(store, MODEL, report) == []
    digest = hashlib.sha256((store / "comparisons.json").read_bytes()).hexdigest()
    old = tmp_path / "reports"
    (old / "compare-x").mkdir(parents=True)
    (old / "compare-x" / "index.html").write_text("old page")
    (old / "comparisons.json").write_text(json.dumps([{"folder": "compare-x", "models": [MODEL, OTHER]}]))
    assert comparisons_of(store, MODEL, old / "x") == []
    assert hashlib.sha256((store / "comparisons.json").read_bytes()).hexdigest() == digest


def test_two_comparisons_both_land_and_a_rerun_replaces_its_entry(tmp_path):
    store = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)
    write_series(store, {"ahon_ln": known_picture()}, TOKENS, model_id=OTHER)
    for name in ("a", "b", "a"):
        out = tmp_path / name
        assert main(["compare", "--store", str(store), "--model", f"{MODEL},{OTHER}", "--reports-dir", str(out)]) == 0
    folders = [e["folder"] for e in json.loads((store / "comparisons.json").read_text())]
    assert folders == [str((tmp_path / "a").resolve()), str((tmp_path / "b").resolve())]
    assert [e["href"] for e in comparisons_of(store, OTHER, tmp_path / "r")] == ["../a/index.html", "../b/index.html"]
