"""The wheel, installed (not editable) into a fresh venv outside the checkout, run from an empty folder.

The fresh venv gets this package from the built wheel alone; its dependencies (torch, transformers,
prefect ...) come from the checkout's venv through a path file, since installing several GB again would
only test pip. The test checks that `dormant_tasks` is imported from the new venv, never from the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _run(cmd, cwd, env, timeout=900) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.parts and "__pycache__" not in p.parts}


def test_wheel_runs_pretrain_track_report_evaluate_from_an_empty_folder(tmp_path):
    wheels, venv, work = tmp_path / "wheels", tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
          str(REPO)], REPO, env)
    (wheel,) = wheels.glob("dormant_heads-*.whl")
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    new_python = venv / "bin" / "python"
    site = Path(_run([str(new_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp_path, env).stdout.strip())
    (site / "checkout_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(new_python), "install", "-q", "--no-deps", str(wheel)],
         tmp_path, env)
    checkout_before = _tree(REPO)

    run_env = {k: v for k, v in env.items() if k not in ("PREFECT_API_URL", "PYTHONPATH", "VIRTUAL_ENV")}
    run_env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                   HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}")
    where = _run([str(new_python), "-c", "import dormant_tasks, flows; print(dormant_tasks.__file__, flows.__file__)"],
                 work, run_env).stdout.split()
    assert all(Path(w).is_relative_to(site) for w in where), where  # the wheel's copy, not the checkout's

    dormant = str(venv / "bin" / "dormant")
    _run([dormant, "pretrain-tiny", "--out", "s", "--steps", "12"], work, run_env)
    checkpoints = sorted(p.name for p in (work / "s").iterdir() if p.is_dir())
    assert len(checkpoints) >= 2, checkpoints
    out = _run([dormant, "track", "--repo", "s", "--limit", "8", "--store", "st"], work, run_env).stdout
    assert f"s: {len(checkpoints)} checkpoints analysed" in out
    _run([dormant, "report", "--store", "st"], work, run_env)
    assert (work / "reports" / "s" / "index.html").is_file()  # the default reports folder is under the cwd
    out = _run([dormant, "evaluate", "--model", f"s/{checkpoints[-1]}", "--limit", "20", "--store", "st",
                "--scores", "ahon_ln"], work, run_env).stdout
    assert "winogrande, 0-shot, 20 items" in out
    assert (work / "st" / "evaluations").is_dir() and (work / "st" / "checkpoints").is_dir()
    assert not list(site.rglob("store")) and not (site / "reports").exists()  # nothing inside the install
    assert _tree(REPO) == checkout_before  # nothing written into the checkout
