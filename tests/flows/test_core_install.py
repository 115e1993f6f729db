"""The core install (no extras) tracks: `dormant track` never imports lm-eval or Dask, and the commands that need an
extra refuse in one line naming it (pyproject's `eval` and `cluster` extras; dormant_tasks/extras.py)."""

from __future__ import annotations

import pytest

from tests.builders.processes import cli_env, run_cli

pytestmark = pytest.mark.slow
# What the core install leaves out, as imported: the eval extra's and the cluster extra's modules.
LEFT_OUT = ("lm_eval", "datasets", "dask", "distributed", "prefect_dask", "dask_cuda")
BLOCKER = """\
import os, sys

BLOCKED = {blocked!r}
LOG = {log!r}


class Blocker:
    \"\"\"As if the package were not installed; every attempt is written down, a guarded one too.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            with open(LOG, "a") as f:
                f.write(f"{{os.getpid()}} {{name}}\\n")
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""


@pytest.fixture
def core_only(tmp_path):
    """(environment of a run where the extras' modules are not importable, the file that logs import attempts)."""
    hook, log = tmp_path / "hook", tmp_path / "imports.log"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(BLOCKER.format(blocked=set(LEFT_OUT), log=str(log)), encoding="utf-8")
    return hook, log


def test_track_runs_and_imports_no_extra(core_only, random_series, tmp_path, prefect_api_url):
    hook, log = core_only
    env = cli_env(hook, PREFECT_API_URL=prefect_api_url)
    r, _ = run_cli(["track", "--model", random_series, "--store", tmp_path / "store"], env, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "3 checkpoints analysed" in r.stdout and (tmp_path / "reports").is_dir()  # the report rendered too
    assert not log.exists(), f"tracking tried to import what the core install leaves out:\n{log.read_text()}"


@pytest.mark.parametrize(
    "args,extra",
    [
        (["evaluate", "--model", "{checkpoint}", "--limit", "4"], "eval"),
        (["track", "--model", "{series}", "--runner", "dask"], "cluster"),
    ],
)
def test_a_command_that_needs_an_extra_refuses_in_one_line_naming_it(core_only, random_series, tmp_path, args, extra):
    hook, _ = core_only
    checkpoint = sorted(random_series.iterdir())[0]
    args = [a.format(checkpoint=checkpoint, series=random_series) for a in args]
    r, _ = run_cli([*args, "--store", tmp_path / "store"], cli_env(hook), tmp_path)
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = r.stderr.strip().splitlines()
    assert f"needs the [{extra}] extra" in line and f"pip install 'dormant-heads[{extra}]'" in line
    assert not (tmp_path / "store").exists()  # refused before anything is written
