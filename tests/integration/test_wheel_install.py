"""The wheel, installed (not editable) into a fresh venv outside the checkout, run from an empty folder.

The fresh venv gets this package from the built wheel alone; its dependencies (torch, transformers,
prefect ...) come from the checkout's venv through a path file, since installing several GB again would
only test pip. The test checks that `dormant_tasks` is imported from the new venv, never from the checkout,
and that every output lands under the working directory: none in the install, none in the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "dormant_tasks", "flows")  # all that a build may read
THIRD_PARTY = ("torch", "transformers", "prefect", "prefect_dask", "numpy", "pyarrow", "matplotlib", "lm_eval")
THIRD_PARTY += ("huggingface_hub", "scipy", "datasets", "distributed", "dask", "filelock", "tqdm", "pandas")


def _run(cmd, cwd, env, timeout=900) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def _files(root: Path) -> dict[str, int]:
    """Every file under `root` (bytecode caches aside) -> its mtime in ns: a change or a new file shows."""
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def build_wheel(tmp_path: Path, env) -> Path:
    """Build from a copy of the sources: an in-tree build writes build/ into the checkout and ships any stale
    module left there. Then check that the wheel holds exactly the two packages and the bundled data."""
    src, wheels = tmp_path / "src", tmp_path / "wheels"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, src / name)
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, src],
        tmp_path,
        env,
    )
    (wheel,) = wheels.glob("dormant_heads-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"dormant_tasks", "flows"}
    assert {"dormant_tasks/data/winogrande_dev.jsonl", "dormant_tasks/data/demo_corpus.txt"} <= set(names)
    return wheel


def fresh_venv(tmp_path: Path, wheel: Path, env) -> tuple[Path, Path]:
    """(venv, its site-packages): the wheel installed with --no-deps, dependencies from the checkout's venv."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path, env)
    python = venv / "bin" / "python"
    site = Path(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env).stdout.strip()
    )
    (site / "checkout_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel], tmp_path, env)
    return venv, site


def test_wheel_runs_pretrain_track_report_evaluate_from_an_empty_folder(tmp_path):
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    venv, site = fresh_venv(tmp_path, build_wheel(tmp_path, env), env)
    work = tmp_path / "work"
    work.mkdir()
    run_env = {
        k: v
        for k, v in env.items()
        if k not in ("PREFECT_API_URL", "PYTHONPATH", "VIRTUAL_ENV", "DORMANT_STORE", "DORMANT_REPORTS")
    }
    run_env.update(
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
    )
    where = _run(
        [venv / "bin" / "python", "-c", "import dormant_tasks, flows; print(dormant_tasks.__file__, flows.__file__)"],
        work,
        run_env,
    )
    assert all(Path(w).is_relative_to(site) for w in where.stdout.split()), where.stdout  # the wheel's copy
    check_users_mypy_strict(venv, work, run_env)
    installed = _files(venv)

    dormant = venv / "bin" / "dormant"
    _run([dormant, "pretrain-tiny", "--model", "s", "--steps", "1"], work, run_env)  # saves steps 0 and 1
    checkpoints = sorted(p.name for p in (work / "s").iterdir() if p.is_dir())
    assert len(checkpoints) == 2, checkpoints
    _run([dormant, "track", "--model", "s", "--limit", "8", "--store", "st"], work, run_env)
    _run([dormant, "report", "--store", "st"], work, run_env)
    assert (work / "reports" / "s" / "index.html").is_file()  # the default reports folder is under the cwd
    _run([dormant, "evaluate", "--model", f"s/{checkpoints[-1]}", "--limit", "20", "--store", "st"], work, run_env)
    assert (work / "st" / "evaluations").is_dir() and (work / "st" / "checkpoints").is_dir()

    assert _files(venv) == installed  # nothing written into the install
    # Other work may go on in the checkout meanwhile, so look for this run's own outputs only.
    leaked = [REPO / "s", REPO / "st", REPO / "reports" / "s", *REPO.glob("data/store/*/series=s")]
    assert not [p for p in leaked if p.exists()], leaked


def check_users_mypy_strict(venv: Path, work: Path, env) -> None:
    """A user's `mypy --strict` against the installed wheel (`py.typed`) accepts the faces' names: strict mode
    re-exports a package's name only when it is imported `name as name` or listed in a literal `__all__` (a face
    built at run time, with neither, failed every import below)."""
    user = work / "analysis.py"
    user.write_text(
        "from dormant_tasks import Store, open_store\n"
        "from dormant_tasks.store import read_table\n"
        "from dormant_tasks.tracking import SeriesView\n"
        "from dormant_tasks.engine import SCORE_FUNCTIONS\n\n\n"
        "def first_series(path: str) -> list[str]:\n"
        "    store: Store = open_store(path)\n"
        "    assert callable(read_table) and SeriesView is not None and SCORE_FUNCTIONS\n"
        "    return store.series()[:1]\n",
        encoding="utf-8",
    )
    # The third-party packages are not followed (mypy's follow_imports=skip: they type as Any): this checks our
    # faces, and following torch, transformers and prefect took 42 s of the 45.
    config = work / "mypy.ini"
    config.write_text("[mypy]\n[mypy-" + ",".join(f"{name}.*" for name in THIRD_PARTY) + "]\nfollow_imports = skip\n")
    cmd = [sys.executable, "-m", "mypy", "--config-file", config.name, "--strict", "--follow-imports=silent"]
    cmd.append("--no-incremental")
    done = subprocess.run(
        [*cmd, "--python-executable", str(venv / "bin" / "python"), user.name],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0 and "Success" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    user.unlink()
    config.unlink()
