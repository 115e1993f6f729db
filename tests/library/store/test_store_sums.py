"""Issue "Nothing lost, second pass", the store's lane: symbolic links never followed by any command, whole-file
checksums of every file (a flipped footer byte is damage, not "0 confident"), and `store repair --check` on a
full disk. Real stores written through the store's write path (`tests.builders.stores.write_series`: no model);
the commands run in process through the CLI, or as a user runs them (`.venv/bin/dormant`) where a limit of the
process is the point."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dormant_tasks import store as S
from dormant_tasks.errors import StoreError
from dormant_tasks.names import series_slug
from dormant_tasks.tracking import rederive
from flows.cli import main as cli_main
from tests.builders.stores import CAL, MODEL, TAUS, write_series

REPO = Path(__file__).resolve().parents[3]
TRANSITIONS = f"{S.derived_file_key('transitions', TAUS, CAL)}.parquet"


@pytest.fixture
def store(tmp_path) -> Path:
    """Four checkpoints of 2 x 4 heads whose states change: transitions to lose."""
    rng = np.random.default_rng(0)
    states = rng.random((4, 2, 4)) < 0.5
    root = write_series(tmp_path / "store", {"ahon_ln": states}, tokens=[10, 20, 30, 40])
    rederive(root, MODEL)  # histories too, as `dormant track` leaves them
    return root


def folder(store: Path, table: str) -> Path:
    return store / table / f"series={series_slug(MODEL)}"


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """A user's own folder with a Parquet file named as the store names its transitions."""
    mine = tmp_path / "userproj"
    mine.mkdir()
    pq.write_table(pa.table({"mine": [1, 2, 3]}), mine / TRANSITIONS)
    pq.write_table(pa.table({"mine": [4]}), mine / "keep.parquet")
    return mine


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------------------------- symbolic links


def test_repair_refuses_to_derive_into_a_linked_series_folder(store, user_folder, capsys):
    """`store repair` derives transitions again; their series folder is a link to a user's folder holding a file of
    the same name: before, that file was replaced through the link."""
    shutil.rmtree(folder(store, "transitions"))
    folder(store, "transitions").symlink_to(user_folder, target_is_directory=True)
    before = snapshot(user_folder)
    assert cli_main(["store", "repair", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a symbolic link" in err[0] and "remove the link" in err[0], err
    assert snapshot(user_folder) == before


def test_track_rederivation_never_writes_over_a_linked_file(store, user_folder):
    """A derived file replaced by a link to a user's file: the re-derivation of `dormant track` refuses it by name
    (before, `os.replace` put the store's file where the link was)."""
    path = folder(store, "head_histories") / f"{S.derived_file_key('head_histories', TAUS, CAL)}.parquet"
    path.unlink()
    path.symlink_to(user_folder / "keep.parquet")
    before = snapshot(user_folder)
    with pytest.raises(StoreError, match="is a symbolic link"):
        rederive(store, MODEL)
    assert path.is_symlink() and snapshot(user_folder) == before


def test_repair_and_check_name_a_linked_file_and_leave_it(store, user_folder, capsys):
    link = folder(store, "head_scores") / "linked.parquet"
    link.symlink_to(user_folder / "keep.parquet")
    (store / "input_scores").mkdir(exist_ok=True)
    (store / "input_scores" / "series=user--linked").symlink_to(user_folder, target_is_directory=True)
    before = snapshot(user_folder)
    for args in (["store", "repair", "--check"], ["store", "repair"]):
        assert cli_main([*args, "--store", str(store)]) == 0
        out = capsys.readouterr().out
        assert f"note: {link} is a symbolic link: left alone" in out, out
        assert "series=user--linked is a symbolic link" in out, out
    assert link.is_symlink() and snapshot(user_folder) == before


def test_upgrade_never_rewrites_a_file_in_a_linked_series_folder(store, tmp_path, capsys):
    """`store upgrade` on a current store rewrites stale agreement files (an empty pair's Jaccard 1.0 -> NaN): one
    in a linked folder is the user's, never rewritten."""
    mine = tmp_path / "agreement"
    mine.mkdir()
    row = {c: 0 for c in S.SCHEMAS["calibration_agreement"].names} | {"jaccard": 1.0, "n_sets": 2}
    row |= {"model_id": "user/x", "revision": "r", "score_fn": "ahon_ln", "calibration_a": "a", "calibration_b": "b"}
    pq.write_table(S.conform([row], "calibration_agreement"), mine / "calibration_agreement.parquet")
    (store / "calibration_agreement").mkdir(exist_ok=True)
    (store / "calibration_agreement" / "series=user--x").symlink_to(mine, target_is_directory=True)
    before = snapshot(mine)
    assert cli_main(["store", "upgrade", "--store", str(store)]) == 0
    assert "series=user--x is a symbolic link: left alone" in capsys.readouterr().out
    assert snapshot(mine) == before


# ------------------------------------------------------------------------------------- checksums


def rename_column(path: Path, old: str = "confident", new: str = "confidenu") -> None:
    """One bit flipped in the footer: the schema's name of a column (t -> u), the same length, so every page
    checksum still holds and pyarrow reads the file, with `confident` all null."""
    data = path.read_bytes()
    start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")  # the footer: its length, then "PAR1"
    at = data.index(bytes([len(old)]) + old.encode(), start) + 1  # the schema element's name (length-prefixed)
    path.write_bytes(data[:at] + new.encode() + data[at + len(old) :])


def test_a_renamed_footer_column_is_damage_not_zero_confident(store, capsys):
    path = folder(store, "transitions") / TRANSITIONS
    rename_column(path)
    t = pq.ParquetFile(path, page_checksum_verification=True).read()  # pages whole: Parquet sees nothing wrong
    assert t.num_rows and "confidenu" in t.column_names
    rel = str(path.relative_to(store))

    assert cli_main(["status", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and rel in err[0] and "checksum" in err[0] and "dormant store repair" in err[0], err
    assert cli_main(["store", "repair", "--check", "--store", str(store)]) == 2
    assert rel in capsys.readouterr().err
    with pytest.raises(StoreError, match=r"is damaged .*checksum.*dormant store repair"):
        S.read_table(store, "transitions", MODEL)

    assert cli_main(["store", "repair", "--store", str(store)]) == 0  # set aside, derived again
    assert f"moved damaged {rel}" in capsys.readouterr().out
    assert "confident" in pq.read_schema(path).names
    assert cli_main(["status", "--verify", "--store", str(store)]) == 0
    assert "verified: every file matches its recorded checksum" in capsys.readouterr().out


def test_a_file_without_a_checksum_is_still_refused_for_a_column_it_should_not_have(store, capsys):
    """A store written before checksums (`_sums` gone): the footer's names are checked against the table's."""
    shutil.rmtree(store / "_sums")
    path = folder(store, "transitions") / TRANSITIONS
    rename_column(path)
    assert cli_main(["status", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "a column 'confidenu' that transitions does not have" in err, err


def test_verify_counts_the_files_without_checksums_and_repair_records_them(store, capsys):
    shutil.rmtree(store / "_sums")
    manifest = S.manifest_path(store, MODEL)
    t = pq.read_table(manifest)
    t = t.set_column(
        t.schema.get_field_index("head_scores_sha256"), "head_scores_sha256", pa.nulls(t.num_rows, pa.string())
    )
    pq.write_table(S.conform(t, "checkpoints"), manifest)  # as a store written before checksums has it
    n_files = sum(1 for t in S.SCHEMAS for _ in S.series_files(store, t, MODEL))
    assert cli_main(["status", "--verify", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"verified: {n_files} files of the store have no recorded checksum yet" in out, out
    digested = sum(r["scores_sha256"] is None for r in S.read_table(store, "checkpoints", model_id=MODEL).to_pylist())
    assert cli_main(["store", "repair", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    # rows written before their scores digest: repair records it, and that rewrite of the manifest records the
    # manifest's checksum too; every other file's is recorded from the file found whole
    assert bool(digested) == (f"recorded the scores digest of {digested} results" in out), out
    assert f"recorded the checksums of {n_files - bool(digested)} whole files" in out, out
    assert cli_main(["status", "--verify", "--store", str(store)]) == 0
    assert "every file matches its recorded checksum" in capsys.readouterr().out


def test_a_damaged_checksum_record_is_named_and_repair_records_every_file_again(store, capsys):
    sums = next((store / "_sums").iterdir())
    sums.write_bytes(sums.read_bytes()[:-20])
    assert cli_main(["status", "--store", str(store)]) == 2
    assert "_sums/" in capsys.readouterr().err
    assert cli_main(["store", "repair", "--store", str(store)]) == 0
    capsys.readouterr()
    assert cli_main(["status", "--verify", "--store", str(store)]) == 0
    assert "every file matches" in capsys.readouterr().out


# ------------------------------------------------------------------------------------- a full disk


def _no_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


@pytest.mark.parametrize("damaged", [False, True], ids=["whole", "damaged"])
def test_repair_check_runs_where_no_byte_can_be_written(store, damaged):
    """RLIMIT_FSIZE=0 stands for a full disk (this runs as root, where a read-only copy would still be written)."""
    if damaged:
        path = folder(store, "transitions") / TRANSITIONS
        rename_column(path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run(
        [sys.executable, "-m", "flows.cli", "store", "repair", "--check", "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        cwd=store.parent,
        preexec_fn=_no_file_size,
        timeout=120,
    )
    assert "Traceback" not in p.stderr, p.stderr
    if damaged:
        assert p.returncode == 2 and TRANSITIONS in p.stderr and "1 damaged file" in p.stderr, p.stderr
    else:
        assert p.returncode == 0 and "every file is whole" in p.stdout, (p.stdout, p.stderr)


def test_verify_does_not_call_a_result_left_by_an_unfinished_write_an_old_file(store, capsys):
    """Issue 62 item 7: after a write that failed between a result's file and its manifest row (EPERM), `--verify`
    called the file no row names "written before the store kept them"; it now says what it may be, and what repair
    does with it."""
    heads = folder(store, "head_scores")
    first = sorted(heads.glob("*.parquet"))[0]
    shutil.copy(first, heads / "stage1-step99-tokens99.parquet")  # a result no manifest row names
    assert cli_main(["status", "--verify", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "stage1-step99-tokens99" in out or "files of the store have no recorded checksum yet" in out, out
    assert "a result left by a write that did not finish" in out and "deletes the second" in out, out
