"""Issue 62, item 7: `track` names what it leaves out. Checkpoints that became duplicates of another are named when a
selection matches only them, and their stored rows leave the findings; names that are not checkpoints (a folder
with another name, a symbolic link that leads nowhere) are reported as `dormant checkpoints` reports them."""

from __future__ import annotations

import shutil

import pytest

import dormant_tasks
from dormant_tasks.errors import ConfigError
from dormant_tasks.findings import series_findings
from tests.builders.processes import cli_env, run_cli
from tests.builders.series import save_random_series

pytestmark = pytest.mark.slow
NAMES = ["stage1-step0-tokens0K", "stage1-step10-tokens20K", "stage1-step25-tokens51K"]


def test_a_selection_of_only_set_aside_checkpoints_names_them_and_their_rows_leave_the_findings(
    tmp_path, tiny_tokenizer
):
    series, store = save_random_series(tmp_path / "series", tiny_tokenizer, NAMES), tmp_path / "store"
    dormant_tasks.track(str(series), store=str(store), no_report=True)
    for name in NAMES[1:]:  # both later checkpoints become copies of the first
        shutil.rmtree(series / name)
        shutil.copytree(series / NAMES[0], series / name)
    with pytest.raises(ConfigError) as e:
        dormant_tasks.track(str(series), store=str(store), no_report=True, steps="10:25")
    message = str(e.value)
    assert "\n" not in message and "matches none of the 1 revisions" in message
    assert all(f"{n} (duplicate of {NAMES[0]})" in message for n in NAMES[1:]), message
    assert "--keep-duplicates" in message and "--audit" in message
    found = series_findings(str(store), series.name)
    assert found.n_checkpoints == 1  # the rows stored before they became copies are not read as current


def test_track_reports_the_names_it_skips_as_checkpoints_does(tmp_path, tiny_tokenizer):
    series, store = save_random_series(tmp_path / "series", tiny_tokenizer, NAMES[:2]), tmp_path / "store"
    shutil.copytree(series / NAMES[0], series / "my-best-model")  # a checkpoint under a name that is no step
    (series / "loop").symlink_to("loop")  # a symbolic link to itself
    dormant_tasks.track(str(series), store=str(store), no_report=True)
    env = cli_env()
    listed, _ = run_cli(["checkpoints", "--model", series], env, tmp_path)
    rerun, _ = run_cli(["track", "--model", series, "--store", store, "--no-report"], env, tmp_path)  # finished
    assert listed.returncode == 0 and rerun.returncode == 0, (listed.stderr, rerun.stderr)
    note = "skipped 2 names that are not checkpoints: loop (a symbolic link that leads to no folder), my-best-model"
    assert f"note: {note}" in listed.stderr.splitlines()
    assert f"dormant track: note: {note}" in rerun.stderr.splitlines(), rerun.stderr
