"""The package's layering (docs/DEVELOPING.md): the library imports no Prefect and no `flows`, and the store's
folder layout is known to `dormant_tasks/store/` only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import dormant_tasks

PACKAGE = Path(dormant_tasks.__file__).resolve().parent


def library_modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_importing_every_library_module_imports_no_prefect():
    modules = library_modules()
    assert len(modules) > 20 and "dormant_tasks.engine.scoring" in modules
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    code += "print(sorted(m for m in sys.modules if m == 'prefect' or m.startswith(('prefect.', 'flows'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_library_never_imports_flows():
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not [n for n in names if n == "flows" or n.startswith("flows.")], path


def test_only_the_store_knows_its_folder_layout():
    """`<store>/<table>/series=<slug>/` and the store's marker file are named in dormant_tasks/store/ only."""
    for path in list(PACKAGE.rglob("*.py")) + list((PACKAGE.parent / "flows").rglob("*.py")):
        if PACKAGE / "store" in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        assert '"series=' not in text and 'f"series=' not in text and "_store.json" not in text, path


# lm-eval's task index: a TaskManager's raw `task_index` (or `_index`) of `TaskIndex` `Entry` records (their
# `yaml_path`, kind, tags and config), its `_factory`; walking them is reading lm-eval's private structures.
TASK_INDEX_INTERNALS = {"TaskIndex", "task_index", "_index", "_factory", "yaml_path"}


def test_lm_evals_internals_are_used_in_one_adapter_module():
    """`evaluation/lmeval_adapter.py` (pinned to lm-eval's version) is the one module that imports lm-eval's
    internal modules or its underscored names, or walks its task index; the rest uses its public surface."""
    internal_modules = ("lm_eval.evaluator_utils", "lm_eval.api.samplers")
    adapter = PACKAGE / "evaluation" / "lmeval_adapter.py"
    for path in PACKAGE.rglob("*.py"):
        if path == adapter:
            continue
        where = path.relative_to(PACKAGE)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            assert name not in TASK_INDEX_INTERNALS, f"{where} reads lm-eval's task index ({name})"
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lm_eval")):
                continue
            private = (
                node.module in internal_modules
                or any(part.startswith("_") for part in node.module.split("."))  # lm_eval.tasks._index, ...
                or any(a.name.startswith("_") or a.name in TASK_INDEX_INTERNALS for a in node.names)
            )
            assert not private, f"{where} imports lm-eval internals ({node.module})"


def test_what_a_run_asks_before_loading_a_model_imports_no_torch():
    """The series' state, the requests, the store, the findings and the series view load no torch, transformers or
    lm-eval: a `track` or `evaluate` that is refused (a bad option, a stored series) answers in a fraction of a
    second. (A type that only annotates, such as the engine's `InputScores`, is imported for type checking only.)"""
    light = [
        "dormant_tasks.tracking.tracker",
        "dormant_tasks.tracking.request",
        "dormant_tasks.tracking.series",
        "dormant_tasks.findings.dynamics",
        "dormant_tasks.tracking.derive",
        "dormant_tasks.evaluation.request",
        "dormant_tasks.evaluation.leaderboard",
        *[m for m in library_modules() if m.startswith("dormant_tasks.store")],
    ]
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in light)
    code += "print(sorted(m for m in ('torch', 'transformers', 'lm_eval', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "[]", out.stdout
