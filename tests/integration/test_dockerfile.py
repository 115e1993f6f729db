"""The Dockerfile's structure, read without Docker (there is no daemon here).

Checked: every `COPY` source exists and survives `.dockerignore` (so the build context holds it), and the wheel
stage copies every source a wheel build reads; the torch pin is the Makefile's and its index the CPU one; torch is
installed before the wheel, and the wheel under a constraint that keeps that torch; the base image's Python
satisfies `requires-python`; the entry point is a `[project.scripts]` command; the extras the file's examples
name exist; every `RUN` line is valid `sh` (`sh -n`) and its extras expansion gives the right pip argument.
Not checked: that the image builds, that the base image or the pinned torch exist on their registries (the
PyTorch index is unreachable from here), that CUDA works in the image.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.integration.test_wheel_install import SOURCES

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments) in order: continuation lines joined, comments and blank lines dropped."""
    out, pending = [], ""
    for line in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        word, _, rest = text.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def comments() -> str:
    return "\n".join(
        line for line in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines() if line.startswith("#")
    )


def arg_defaults() -> dict[str, str]:
    return dict(rest.partition("=")[::2] for word, rest in instructions() if word == "ARG")


def in_context(path: str) -> bool:
    """Whether `.dockerignore` leaves `path` in the build context: the last pattern that matches it or a folder
    above it decides (`!` re-includes; `**/` matches at any depth). fnmatch's reading of a pattern, which is
    Docker's for the patterns this file uses."""
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    kept = True
    for pattern in patterns:
        negated, pattern = pattern.startswith("!"), pattern.removeprefix("!")
        if pattern.startswith("**/"):
            tails = ["/".join(q.split("/")[i:]) for q in prefixes for i in range(q.count("/") + 1)]
            matched = any(fnmatch.fnmatchcase(t, pattern[3:]) for t in tails)
        else:
            matched = any(fnmatch.fnmatchcase(q, pattern) for q in prefixes)
        if matched:
            kept = negated
    return kept


def test_the_ignore_reader_reads_an_allowlist():
    assert in_context("pyproject.toml") and in_context("flows/cli/deploy.py")
    assert not in_context(".venv/bin/python") and not in_context("data/store/_store.json")
    assert not in_context("flows/__pycache__/track.cpython-311.pyc") and not in_context("tests/conftest.py")


def test_every_copied_source_exists_and_is_in_the_build_context():
    copies = [shlex.split(rest) for word, rest in instructions() if word == "COPY"]
    local = [args for args in copies if not any(a.startswith("--from") for a in args)]
    assert local, "no COPY from the build context"
    sources = [s for args in local for s in args[:-1] if not s.startswith("--")]
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: no such file in the repository"
        assert in_context(source), f"COPY {source}: .dockerignore leaves it out of the build context"
        if (REPO / source).is_dir():  # what the package holds (modules, templates, bundled data) goes in with it
            files = [p for p in (REPO / source).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
            left_out = [str(p.relative_to(REPO)) for p in files if not in_context(str(p.relative_to(REPO)))]
            assert files and left_out == [], left_out[:5]
    assert set(SOURCES) <= set(sources), f"the wheel build reads {SOURCES}; the Dockerfile copies {sources}"


def test_torch_is_pinned_as_the_makefile_pins_it_and_installed_first_from_its_index():
    makefile_pin = re.search(r"pip install -q torch==([\w.]+)", (REPO / "Makefile").read_text(encoding="utf-8"))
    args = arg_defaults()
    assert makefile_pin and args["TORCH"] == makefile_pin.group(1), "one torch pin: the Makefile's"
    assert args["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu", "CPU by default"
    runs = [rest for word, rest in instructions() if word == "RUN"]
    torch_run = next(i for i, r in enumerate(runs) if '"torch==${TORCH}"' in r)
    wheel_run = next(i for i, r in enumerate(runs) if "/wheels/dormant_heads-" in r)
    assert torch_run < wheel_run
    assert '--index-url "${TORCH_INDEX}"' in runs[torch_run]
    assert 'echo "torch==${TORCH}" > /etc/torch-constraint.txt' in runs[torch_run]
    assert "--constraint /etc/torch-constraint.txt" in runs[wheel_run], "the wheel's install may not move torch"


def test_the_base_image_python_satisfies_requires_python_and_the_entry_point_is_the_command():
    base = arg_defaults()["BASE"]
    version = re.fullmatch(r"python:(\d+)\.(\d+)(-[\w.-]+)?", base)
    lowest = re.fullmatch(r">=(\d+)\.(\d+)", PROJECT["requires-python"])
    assert version and lowest and tuple(map(int, version.groups()[:2])) >= tuple(map(int, lowest.groups()))
    (entry,) = [rest for word, rest in instructions() if word == "ENTRYPOINT"]
    assert shlex.split(entry.strip("[]").replace(",", " "))[0] in PROJECT["scripts"]


def test_the_extras_the_examples_name_exist():
    named = re.findall(r"EXTRAS=([\w,]+)", comments())
    assert named, "the Dockerfile shows no EXTRAS example"
    for extras in named:
        assert set(extras.split(",")) <= set(PROJECT["optional-dependencies"]), extras


@pytest.mark.parametrize("extras,suffix", [("", ""), ("gpu,cluster", "[gpu,cluster]")])
def test_every_run_line_is_valid_sh_and_the_extras_expand_to_pip_extras(extras, suffix, tmp_path):
    runs = [rest for word, rest in instructions() if word == "RUN"]
    for run in runs:
        r = subprocess.run(["sh", "-n", "-c", run], capture_output=True, text=True)
        assert r.returncode == 0, f"RUN {run}\n{r.stderr}"
    (wheel_run,) = [r for r in runs if "/wheels/dormant_heads-" in r]
    expansion = re.search(r'"\$\{whl\}([^"]*)"', wheel_run).group(1)
    r = subprocess.run(
        ["sh", "-c", f'whl=/wheels/w.whl; printf %s "${{whl}}{expansion}"'],
        env={"EXTRAS": extras, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert r.stdout == "/wheels/w.whl" + suffix
