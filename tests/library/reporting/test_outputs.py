"""Outputs never replace what the tool did not write (issue 27 item 1; issue 30 item 4: a report belongs to its
store). Real stores (`test_report.write_series`), the real CLI in-process, real folders and files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dormant_tasks.errors import ConfigError
from dormant_tasks.outputs import OUTPUT_MARKER, Owner, check_file, check_folder, publish_folder
from dormant_tasks.reporting.report import render_report
from flows.cli import main
from tests.builders.stores import MODEL, TOKENS, known_picture, write_series


@pytest.fixture
def store(tmp_path):
    return write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` with its sha256: what must survive a refused run."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_line_refusal(capsys, command: list[str], *needles: str) -> str:
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"dormant {command[0]}: error:"), err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize("command", ["report", "findings"])
def test_a_user_file_in_the_reports_dir_survives(command, store, tmp_path, capsys):
    mine = tmp_path / "mydata"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    one_line_refusal(
        capsys, [command, "--store", str(store), "--reports-dir", str(mine)], "--reports-dir", "thesis.tex"
    )
    assert tree(mine) == {"thesis.tex": hashlib.sha256(b"years of work").hexdigest()}
    assert {p.name for p in tmp_path.iterdir()} == {"store", "mydata"}, "no staging folder left"


def test_a_user_file_added_to_a_marked_report_survives(store, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["report", "--store", str(store), "--reports-dir", str(out)]) == 0
    (out / "figures" / "my_notes.txt").write_text("mine")
    capsys.readouterr()
    one_line_refusal(capsys, ["report", "--store", str(store), "--reports-dir", str(out)], "figures/my_notes.txt")
    assert (out / "figures" / "my_notes.txt").read_text() == "mine" and (out / "index.html").is_file()


def test_the_store_is_never_a_reports_dir(store, tmp_path, capsys, monkeypatch):
    before = tree(store)
    for where, needle in [
        (store, "is the store"),
        (store / "checkpoints", "inside the store"),
        (tmp_path, "holds the store"),
    ]:
        one_line_refusal(
            capsys, ["report", "--store", str(store), "--reports-dir", str(where)], "--reports-dir", needle
        )
    assert tree(store) == before
    monkeypatch.chdir(tmp_path / "store")  # `--reports-dir .` there: the store, and the working folder
    one_line_refusal(capsys, ["report", "--store", ".", "--reports-dir", "."], "--reports-dir")
    assert tree(store) == before


def test_the_working_folder_with_user_files_is_refused(store, tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("mine")
    monkeypatch.chdir(work)
    one_line_refusal(capsys, ["report", "--store", str(store), "--reports-dir", "."], "--reports-dir", "working folder")
    assert tree(work) == {"notes.md": hashlib.sha256(b"mine").hexdigest()}


def test_a_reports_dir_that_is_a_file_is_refused_and_kept(store, tmp_path, capsys):
    f = tmp_path / "report.html"
    f.write_text("a user's page")
    one_line_refusal(capsys, ["report", "--store", str(store), "--reports-dir", str(f)], "--reports-dir", "is a file")
    assert f.read_text() == "a user's page" and sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "store"]


def test_a_second_stores_report_never_replaces_the_first(store, tmp_path, capsys):
    other = write_series(tmp_path / "other-store", {"ahon_ln": known_picture()[:4]}, TOKENS[:4])
    out = tmp_path / "reports"
    first = render_report(store, MODEL, out_dir=out)
    before = tree(out)
    err = one_line_refusal(capsys, ["report", "--store", str(other), "--reports-dir", str(out)], "--reports-dir")
    assert str(store.resolve()) in err and str(other.resolve()) in err
    assert tree(out) == before and first.index_html.is_file()
    with pytest.raises(ConfigError, match="--reports-dir"):  # the library's own check, reuse or not
        render_report(other, MODEL, out_dir=out, reuse=True)
    assert tree(out) == before
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    assert (marker["kind"], marker["store"], marker["series"]) == ("report", str(store.resolve()), MODEL)
    # findings into a report folder would replace the report: refused too
    one_line_refusal(capsys, ["findings", "--store", str(store), "--reports-dir", str(out)], "the report of")
    assert tree(out) == before


def test_an_empty_folder_and_a_report_rendered_before_the_marker_are_written(store, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert render_report(store, MODEL, out_dir=empty).index_html.is_file()
    legacy = tmp_path / "legacy"
    render_report(store, MODEL, out_dir=legacy)
    (legacy / OUTPUT_MARKER).unlink()  # as an older dormant-heads left it: its own files only
    render_report(store, MODEL, out_dir=legacy)
    assert (legacy / OUTPUT_MARKER).is_file()


def test_publish_checks_again_at_the_swap(tmp_path):
    """A folder that got a user's file between the check and the swap is not replaced."""
    owner = Owner.of("report", tmp_path / "store", "s")
    out = tmp_path / "out"
    assert check_folder(out, owner) == out.resolve()
    out.mkdir()
    (out / "x.txt").write_text("mine")
    tmp = tmp_path / ".out.tmp"
    tmp.mkdir()
    with pytest.raises(ConfigError, match="x.txt"):
        publish_folder(tmp, out, owner)
    assert (out / "x.txt").read_text() == "mine"


def test_score_out_replaces_only_its_own_file(tmp_path):
    theirs = tmp_path / "theirs.parquet"
    pq.write_table(pa.table({"a": [1]}), theirs)
    with pytest.raises(ConfigError, match="--out .* was not written by dormant-heads"):
        check_file(theirs)
    text = tmp_path / "notes.txt"
    text.write_text("mine")
    with pytest.raises(ConfigError, match="--out"):
        check_file(text)
    ours = tmp_path / "ours.parquet"
    pq.write_table(pa.table({"a": [1]}).replace_schema_metadata({b"dormant_heads": b"{}"}), ours)
    assert check_file(ours) == ours and check_file(tmp_path / "new.parquet") == tmp_path / "new.parquet"


def test_a_saved_request_whose_reports_dir_names_a_file_keeps_the_file(random_series, tmp_path, capsys):
    """`track --request FILE` with `reports_dir` naming a user's file: refused before any work."""
    from dormant_tasks.tracking.request import TrackRequest

    page = tmp_path / "page.html"
    page.write_text("a user's page")
    saved = tmp_path / "request.json"
    saved.write_text(
        TrackRequest(source=str(random_series), store=str(tmp_path / "store"), reports_dir=str(page)).to_json()
    )
    one_line_refusal(capsys, ["track", "--request", str(saved)], "--reports-dir", "is a file")
    assert page.read_text() == "a user's page"
    assert not (tmp_path / "store").exists(), "nothing written by a refused run"
