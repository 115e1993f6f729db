"""The reporting part's layering: it reads the store through tracking and evaluation only, and none of its modules
imports one that imports it back (function-level imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import dormant_tasks

REPORTING = Path(dormant_tasks.__file__).resolve().parent / "reporting"


def imported(path: Path) -> set[str]:
    """Every module an `import` anywhere in the file names, and `from M import N` as both M and M.N."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def reporting_graph() -> dict[str, set[str]]:
    """module stem -> the stems of the reporting modules it imports."""
    stems = {p.stem for p in REPORTING.glob("*.py")}
    graph = {}
    for path in REPORTING.glob("*.py"):
        parts = (n.split(".") for n in imported(path) if n.startswith("dormant_tasks.reporting."))
        graph[path.stem] = {p[2] for p in parts if p[2] in stems} - {path.stem}
    return graph


def test_reporting_never_imports_the_store():
    for path in REPORTING.glob("*.py"):
        store = sorted(n for n in imported(path) if n == "dormant_tasks.store" or n.startswith("dormant_tasks.store."))
        assert not store, f"reporting/{path.name} imports {store}: read through tracking.series or evaluation"


def test_no_reporting_module_imports_one_that_imports_it_back():
    graph = reporting_graph()
    assert "figures" in graph["page"]  # the walk sees the imports
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for dep in graph[todo.pop()] - seen:
                seen.add(dep)
                todo.append(dep)
        assert start not in seen, f"reporting/{start}.py is part of an import cycle"
