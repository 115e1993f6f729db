"""Dependencies as imported: every third-party import of the library and the flows is declared in
`pyproject.toml`, and every declared dependency is imported.

- An import that runs when its module is imported (at module level, a class body included) needs a core
  dependency (`[project].dependencies`): a plain install must import every module.
- An import inside a function, or one guarded by `try: ... except ImportError` (the optional extras' way), may
  also come from an extra (`[project.optional-dependencies]`, the dev extra aside: the library never needs it).
- Imports under `if TYPE_CHECKING:` never run and are not counted.

Import names are mapped to their distributions by the installed packages' own records
(`importlib.metadata.packages_distributions`), so `yaml` is PyYAML and `huggingface_hub` is huggingface-hub.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import packages_distributions, version
from pathlib import Path

import dormant_tasks

ROOT = Path(dormant_tasks.__file__).resolve().parent.parent
OWN = ("dormant_tasks", "flows")
# Extras the library never imports: the developer's tools, and the scale-out tools run on the command line
NOT_IMPORTED = ("dev", "cluster-tools")
# Imports of an extra that the dev venv cannot hold, each with its extra and why: they must stay inside a function
# and be declared there. dask-cuda pins dask and distributed to its RAPIDS release (rapids-dask-dependency),
# which would move the dev venv's own; the local cluster uses it where a GPU host installed the cluster-tools extra.
NOT_INSTALLED_HERE = {"dask_cuda": ("cluster-tools", "dask-cuda")}


@dataclass(frozen=True)
class ThirdPartyImport:
    where: str  # file:line
    root: str  # the top-level import name (`huggingface_hub`)
    at_import: bool  # runs when its module is imported (module level, not guarded)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def _requirement_name(requirement: str) -> str:
    return _normalise(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0))


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(core dependencies, {extra: its dependencies}) as normalised distribution names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {k: {_requirement_name(r) for r in v} for k, v in project.get("optional-dependencies", {}).items()}
    return {_requirement_name(r) for r in project["dependencies"]}, extras


def _guards_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
            return True
    return False


def third_party_imports(root: Path) -> list[ThirdPartyImport]:
    out: list[ThirdPartyImport] = []

    def visit(node: ast.AST, path: Path, at_import: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, path, False)
            elif isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                for stmt in child.orelse:
                    visit(stmt, path, at_import)
            elif isinstance(child, ast.Try) and _guards_import_error(child):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), path, False)
                for part in (child.handlers, child.orelse, child.finalbody):
                    for stmt in part:
                        visit(ast.Module(body=[stmt], type_ignores=[]), path, at_import)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                if isinstance(child, ast.ImportFrom) and child.level:
                    continue  # relative: our own
                modules = [a.name for a in child.names] if isinstance(child, ast.Import) else [child.module or ""]
                for module in modules:
                    top = module.split(".")[0]
                    if top not in OWN and top not in sys.stdlib_module_names and top != "__future__":
                        where = f"{path.relative_to(root)}:{child.lineno}"
                        out.append(ThirdPartyImport(where, top, at_import))
            else:
                visit(child, path, at_import)

    for base in OWN:
        for path in sorted((root / base).rglob("*.py")):
            visit(ast.parse(path.read_text(encoding="utf-8")), path, True)
    return out


@cache
def _distributions() -> dict[str, list[str]]:
    return packages_distributions()  # reads every installed package's record: once


def distribution_of(import_name: str) -> str | None:
    dists = _distributions().get(import_name)
    return _normalise(dists[0]) if dists else None


def test_every_import_is_declared_where_it_is_needed():
    core, extras = declared()
    optional = set().union(*(deps for name, deps in extras.items() if name not in NOT_IMPORTED))
    problems = []
    for imp in third_party_imports(ROOT):
        dist = distribution_of(imp.root)
        if dist is None and imp.root in NOT_INSTALLED_HERE:
            extra, name = NOT_INSTALLED_HERE[imp.root]
            if imp.at_import or name not in extras.get(extra, set()):
                problems.append(
                    f"{imp.where}: `{imp.root}` must be imported inside a function and declared in [{extra}]"
                )
        elif dist is None:
            problems.append(f"{imp.where}: `{imp.root}` is not installed: declare it and install it")
        elif imp.at_import and dist not in core:
            problems.append(
                f"{imp.where}: `{imp.root}` ({dist}) is imported at module level but is not a core dependency: add it "
                "to [project].dependencies, or import it inside the function that needs it behind an extra"
            )
        elif dist not in core | optional:
            problems.append(f"{imp.where}: `{imp.root}` ({dist}) is declared nowhere: add it to pyproject.toml")
    assert problems == []


def test_every_declared_dependency_is_imported():
    core, extras = declared()
    imported = {distribution_of(i.root) for i in third_party_imports(ROOT)}
    unused = sorted(core - imported) + sorted(
        set().union(*(d for n, d in extras.items() if n not in NOT_IMPORTED)) - imported
    )
    assert unused == [], f"declared but imported nowhere in dormant_tasks/ or flows/: {unused}"


def test_the_import_reader_sees_each_kind_of_import(tmp_path):
    """The reader itself: module level, class body, function, guarded, type-checking only."""
    (tmp_path / "dormant_tasks").mkdir()
    (tmp_path / "flows").mkdir()
    (tmp_path / "dormant_tasks" / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import numpy\n"
        "class A:\n    import pandas\n"
        "def f():\n    import scipy.stats\n"
        "try:\n    import triton\nexcept ImportError:\n    triton = None\n"
        "if TYPE_CHECKING:\n    import matplotlib\n"
        "from . import sibling\nimport os, json\n",
        encoding="utf-8",
    )
    found = {(i.root, i.at_import) for i in third_party_imports(tmp_path)}
    assert found == {("numpy", True), ("pandas", True), ("scipy", False), ("triton", False)}


def test_the_version_lives_in_one_place():
    """pyproject.toml takes the version from dormant_tasks/version.py (dynamic), so the installed metadata and
    `dormant --version` cannot disagree."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dormant_tasks.version.__version__"}
    assert version("dormant-heads") == dormant_tasks.__version__
    assert (ROOT / "dormant_tasks" / "py.typed").is_file()
