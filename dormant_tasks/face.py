"""A part's face: the names other parts may import from it, loaded on first use.

Each folder of the library (`engine`, `checkpoints`, `store`, `tracking`, `evaluation`, `reporting`) lists its
public names in its `__init__.py`, as imports inside `if TYPE_CHECKING:` (so type checkers and readers see
where each comes from), and ends with `__getattr__, __dir__, __all__ = lazy_face(__name__)`. Other parts import
those names from the folder (`from dormant_tasks.store import read_table`), never from its modules;
`tests/library/test_layers.py` checks it. Nothing is imported until a name is first used, so the command line's
`--help` and a light import of one part load no torch, pyarrow or matplotlib.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path


def face_names(init_file: str | Path) -> dict[str, str]:
    """{public name: the module that defines it}, read from the `if TYPE_CHECKING:` imports of an `__init__.py`."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    names.update({a.asname or a.name: stmt.module for a in stmt.names})
    return names


def lazy_face(package: str) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` of a folder's `__init__.py`: a public name is taken from its module
    when first asked for (each time from the module, so a test that patches the module is seen)."""
    homes = face_names(sys.modules[package].__file__ or "")

    def __getattr__(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    def __dir__() -> list[str]:
        return sorted(homes)

    return __getattr__, __dir__, sorted(homes)
