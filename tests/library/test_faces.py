"""The faces are plain Python (`dormant_tasks/face.py`): the package imports, and every public name of every face
resolves, from a zip archive and from `.pyc` files alone (no source to read). (That a user's `mypy --strict`
accepts the face names of the installed wheel is checked in `tests/integration/test_wheel_install.py`.)

Each case runs in a fresh interpreter whose `sys.path` starts with the built copy, and checks that the package
was imported from there (not from the checkout's editable install).
"""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import dormant_tasks

ROOT = Path(dormant_tasks.__file__).resolve().parent.parent
PACKAGES = ("dormant_tasks", "flows")

# Imports every face from the copy first on sys.path, resolves each public name, and builds the CLI's parser.
CHECK = """
import importlib, sys
sys.path.insert(0, {where!r})
sys.dont_write_bytecode = True
import dormant_tasks
assert dormant_tasks.__file__.startswith({where!r}), dormant_tasks.__file__
names = 0
for package in {faces!r}:
    face = importlib.import_module(package)
    assert face.__spec__.origin.startswith({where!r}), face.__spec__.origin
    for name in face.__all__:
        assert getattr(face, name) is not None, (package, name)
        names += 1
from flows.cli import build_parser
assert "track" in build_parser().format_help()
print("resolved", names)
"""

FACES = ["dormant_tasks"] + [
    f"dormant_tasks.{f}"
    for f in ("engine", "checkpoints", "store", "statistics", "tracking", "findings", "evaluation", "reporting")
]


def _copy_tree(dest: Path) -> None:
    for base in PACKAGES:
        shutil.copytree(ROOT / base, dest / base, ignore=shutil.ignore_patterns("__pycache__"))


def _run_check(where: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-I", "-c", CHECK.format(where=str(where), faces=FACES)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.split()[-1])


def _expected() -> int:
    import importlib

    return sum(len(importlib.import_module(f).__all__) for f in FACES)


@pytest.mark.slow
def test_the_package_and_every_face_name_import_from_a_zip(tmp_path):
    tree = tmp_path / "tree"
    _copy_tree(tree)
    archive = tmp_path / "dormant.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(tree.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(tree).as_posix())
    assert _run_check(archive) == _expected()


@pytest.mark.slow
def test_the_package_and_every_face_name_import_from_pyc_files_alone(tmp_path):
    tree = tmp_path / "tree"
    _copy_tree(tree)
    assert compileall.compile_dir(tree, quiet=1, legacy=True)  # foo.pyc beside foo.py, importable without it
    for source in tree.rglob("*.py"):
        source.unlink()
    assert not list(tree.rglob("*.py"))
    assert _run_check(tree) == _expected()
