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
from dormant_tasks.outputs import (
    OUTPUT_MARKER,
    Owner,
    _remove_listed,
    check_file,
    check_folder,
    marker_of,
    publish_folder,
    staging_folder,
)
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


def test_an_empty_folder_is_written_and_an_unmarked_report_is_refused(store, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert render_report(store, MODEL, out_dir=empty).index_html.is_file()
    legacy = tmp_path / "legacy"
    render_report(store, MODEL, out_dir=legacy)
    (legacy / OUTPUT_MARKER).unlink()  # as an older dormant-heads left it, or as a user's own files of those names
    before = tree(legacy)
    one_line_refusal(
        capsys, ["report", "--store", str(store), "--reports-dir", str(legacy)], OUTPUT_MARKER, f"delete {legacy}"
    )
    assert tree(legacy) == before


@pytest.mark.parametrize("command", ["report", "findings"])
def test_the_users_own_index_and_summary_are_never_adopted(command, store, tmp_path, capsys):
    """The names a report writes are no proof of ownership: a user's index.html, summary.md and figures/holiday.png
    (what a report folder held before the marker existed) stay as they are."""
    site = tmp_path / "site"
    (site / "figures").mkdir(parents=True)
    (site / "index.html").write_text("<h1>my page</h1>")
    (site / "summary.md").write_text("# my notes")
    (site / "figures" / "holiday.png").write_bytes(b"\x89PNG my holiday")
    before = tree(site)
    one_line_refusal(capsys, [command, "--store", str(store), "--reports-dir", str(site)], "--reports-dir", "delete")
    assert tree(site) == before
    assert {p.name for p in tmp_path.iterdir()} == {"store", "site"}, "no staging folder left"


def test_a_folder_or_link_added_to_a_marked_report_is_refused_and_kept(store, tmp_path, capsys):
    """Only the marker's manifest is the tool's: an empty folder the user made there, a link to their data (never
    followed), a listed file they replaced by a link: each refused by name, nothing touched."""
    out = tmp_path / "r"
    render_report(store, MODEL, out_dir=out)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "data.csv").write_text("years of work")
    command = ["report", "--store", str(store), "--reports-dir", str(out)]
    (out / "drafts").mkdir()  # empty
    one_line_refusal(capsys, command, "(e.g. drafts)")
    assert (out / "drafts").is_dir()
    (out / "drafts").rmdir()
    (out / "data").symlink_to(mine)
    one_line_refusal(capsys, command, "(e.g. data)")
    (out / "data").unlink()
    summary = out / "summary.md"
    summary.unlink()
    summary.symlink_to(mine / "data.csv")
    one_line_refusal(capsys, command, "(e.g. summary.md)")
    assert summary.is_symlink() and tree(mine) == {"data.csv": hashlib.sha256(b"years of work").hexdigest()}
    summary.unlink()
    assert main(command) == 0  # the tool's own files only: replaced
    assert summary.is_file() and not summary.is_symlink()


def test_a_file_added_to_a_marked_report_while_it_is_drawn_is_kept(store, tmp_path):
    """Between the first check and the swap (the figures take seconds): the swap refuses, the staging folder goes.
    In the instant between the swap's own check and its rename: the file is kept, in a folder beside."""
    owner = Owner.of("report", store, MODEL)
    out = tmp_path / "r"
    render_report(store, MODEL, out_dir=out)
    assert check_folder(out, owner) == out.resolve()
    tmp = staging_folder(out, owner)
    (out / "late.txt").write_text("mine")
    with pytest.raises(ConfigError, match="late.txt"):
        publish_folder(tmp, out, owner)
    assert (out / "late.txt").read_text() == "mine"
    (out / "late.txt").unlink()
    manifest = marker_of(out)[1]
    old = tmp_path / ".r.old-1234abcd"
    out.rename(old)
    (old / "figures" / "late.txt").write_text("mine")  # what the user added in that instant
    _remove_listed(old, manifest, out)
    assert tree(tmp_path / "r.kept-1234abcd") == {"figures/late.txt": hashlib.sha256(b"mine").hexdigest()}
    assert not old.exists()


def test_publish_checks_again_at_the_swap(tmp_path):
    """A folder that got a user's file between the check and the swap is not replaced."""
    owner = Owner.of("report", tmp_path / "store", "s")
    out = tmp_path / "out"
    assert check_folder(out, owner) == out.resolve()
    out.mkdir()
    (out / "x.txt").write_text("mine")
    tmp = staging_folder(out, owner)
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


def test_every_command_refuses_an_unmarked_report_in_one_line(store, random_series, tmp_path, capsys, monkeypatch):
    """`report` (named and default folder), `findings`, `compare`, `track` and `demo` (both ask
    `check_report_folder` before any work): the same line, naming the option and the fix."""
    write_series(store, {"ahon_ln": known_picture()}, TOKENS, model_id="test-org/other-series")
    legacy = tmp_path / "legacy"
    render_report(store, MODEL, out_dir=legacy)
    (legacy / OUTPUT_MARKER).unlink()
    before = tree(legacy)
    named = ["--reports-dir", str(legacy)]
    for command in (
        ["report", "--store", str(store), "--model", MODEL, *named],
        ["findings", "--store", str(store), "--model", MODEL, *named],
        ["compare", "--store", str(store), "--model", f"{MODEL},test-org/other-series", *named],
        ["track", "--model", str(random_series), "--store", str(tmp_path / "new-store"), *named],
        ["demo", "--store", str(tmp_path / "demo-store"), *named],
    ):
        one_line_refusal(capsys, command, f"--reports-dir {legacy} has no {OUTPUT_MARKER}", f"delete {legacy}")
        assert tree(legacy) == before
    monkeypatch.chdir(tmp_path)
    default = Path("reports") / "test-org--tiny-series"
    default.parent.mkdir()
    legacy.rename(default)
    one_line_refusal(
        capsys, ["report", "--store", str(store), "--model", MODEL], f"the default --reports-dir {default} has no"
    )
    assert not (tmp_path / "new-store").exists() and not (tmp_path / "demo-store").exists()


def test_report_of_a_folder_the_store_does_not_track_is_refused(tmp_path, capsys):
    """`--model FOLDER` whose name is a series the store keeps from another folder: that other folder's report
    under this folder's name, before; one line now. The tracked folder itself is reported under its name."""
    from dormant_tasks.store.provenance import record_source

    tracked, other = tmp_path / "a" / "tiny", tmp_path / "b" / "tiny"
    tracked.mkdir(parents=True)
    other.mkdir(parents=True)
    store = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS, model_id="tiny")
    record_source(store, "tiny", f"local:{tracked.resolve()}")
    for command in ("report", "findings"):
        one_line_refusal(
            capsys,
            [command, "--store", str(store), "--model", str(other), "--reports-dir", str(tmp_path / "r")],
            f"--model {other}",
            "pass --model tiny",
        )
    assert not (tmp_path / "r").exists()
    assert main(["report", "--store", str(store), "--model", str(tracked), "--reports-dir", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "summary.md").read_text().startswith("# Dormant heads: tiny\n")


def test_a_folder_in_the_working_directory_does_not_shadow_the_stored_series(tmp_path, monkeypatch, capsys):
    """From a folder that holds another `tiny/`, `--model tiny` of a command that reads the store is the stored
    series (before: refused, with the advice "pass --model tiny", the command that had just failed); `./tiny`
    forces the folder, and its refusal's advice is the bare name, which works (`names.names_stored_series`)."""
    from dormant_tasks.store.provenance import record_source

    tracked, work = tmp_path / "a" / "tiny", tmp_path / "work"
    tracked.mkdir(parents=True)
    (work / "tiny").mkdir(parents=True)
    store = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS, model_id="tiny")
    record_source(store, "tiny", f"local:{tracked.resolve()}")
    monkeypatch.chdir(work)
    out = tmp_path / "r"
    assert main(["report", "--store", str(store), "--model", "tiny", "--reports-dir", str(out)]) == 0
    assert (out / "summary.md").read_text().startswith("# Dormant heads: tiny\n")
    assert main(["findings", "--store", str(store), "--model", "tiny"]) == 0
    capsys.readouterr()
    err = one_line_refusal(capsys, ["findings", "--store", str(store), "--model", "./tiny"], "pass --model tiny ")
    assert "--model ./tiny" not in err.split("pass")[1], err  # the advice is not the failing command


def test_the_model_rule_names_a_stored_series_unless_spelled_as_a_path():
    from dormant_tasks.names import names_stored_series, spelled_as_path

    stored = ["tiny", "org/model"]
    assert names_stored_series("tiny", stored) and names_stored_series("org/model", stored)
    for forced in ("./tiny", "/abs/tiny", "~/tiny", "tiny/", "../tiny"):
        assert spelled_as_path(forced) and not names_stored_series(forced, stored)
    assert not names_stored_series("other", stored) and not spelled_as_path("org/model")


def test_a_full_disk_is_one_line_and_the_old_report_stays(store, tmp_path):
    """A real `dormant report` process whose file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes its figure writes
    fail with EFBIG, as a full disk fails them with ENOSPC: one line naming the folder and the fix, exit 2, the
    staging folder removed, the old report as it was."""
    import os
    import resource
    import signal
    import subprocess
    import sys

    out = tmp_path / "r"
    render_report(store, MODEL, out_dir=out)
    before = tree(out)

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    root = Path(__file__).resolve().parents[3]
    env = os.environ | {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "flows.cli", "report", "--store", str(store), "--reports-dir", str(out)]
    done = subprocess.run(command, preexec_fn=limited, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("dormant report: error: cannot write --reports-dir") and str(out) in line, line
    assert "free space" in line and "another --reports-dir" in line and "intact" in line, line
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r", "store"], "no staging folder left"


def test_a_report_of_one_function_draws_no_agreement_and_explains_its_ids(tmp_path):
    """Agreement between score functions is no measurement with one function: no figure (before: drawn). The
    summary's first line says what its ids are and counts in words ("1 checkpoint", not "checkpoint(s)")."""
    store = write_series(tmp_path / "store", {"ahon_ln": known_picture()}, TOKENS)
    report = render_report(store, MODEL, out_dir=tmp_path / "r")
    assert not (tmp_path / "r" / "figures" / "agreement.svg").exists()
    first = (tmp_path / "r" / "summary.md").read_text().splitlines()[2]
    assert first.startswith("6 checkpoints from ") and "(a hash of every function's threshold" in first, first
    assert report is not None
