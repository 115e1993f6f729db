"""A part's face: the names other parts may import from it, loaded on first use.

Each folder of the library (`engine`, `checkpoints`, `store`, `statistics`, `tracking`, `findings`, `evaluation`,
`reporting`) and the package itself list their public names once, as imports under `if TYPE_CHECKING:`, each in
the explicit re-export form `name as name`, and end with one call:

    from typing import TYPE_CHECKING

    from dormant_tasks.face import attach

    if TYPE_CHECKING:  # the public names, each from its module (`as`: re-exported, for mypy --strict)
        from dormant_tasks.store.io import read_table as read_table, write_table as write_table

    __all__, __getattr__, __dir__ = attach(__name__)

Type checkers read the imports (the `as` form is what `mypy --strict` and ruff take as a re-export; a literal
`__all__` would be a third spelling). The interpreter never runs them: `attach` reads them from the face's
compiled code (`dis`), so it knows each name's module, loads that module when the name is first used, and
returns `__all__`. Nothing is read from a source file at run time, so the package imports from a wheel, a zip or
`.pyc` files alone; and nothing is imported until a name is first used, so `--help` and a light import of one part
load no torch, pyarrow or matplotlib. `tests/library/test_layers.py` reads the same imports with `ast` (the
layering rules), refuses one without its `as` twin, and checks that both readings agree. The pattern is
scientific-python's SPEC 1 (`lazy_loader.attach`) with its stub written into the face itself.

To make a name public, add one `name as name` import to its folder's face. (A face in the earlier format, with a
literal `__all__` and the map `{module: [names]}`, converts by writing each map entry as such an import.)
"""

from __future__ import annotations

import dis
import importlib
import sys
from collections.abc import Callable


def attach(package: str) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` of the face `package`, called at the end of its `__init__.py`: its
    public names are the names it imports from its own modules (`from {package}.m import x as x`) that the face
    has not bound by then, that is, the imports under `if TYPE_CHECKING:`. A name is taken from its module when
    first asked for, each time from the module, so a test that patches the module is seen. ImportError when the
    face names no name, or one name from two modules."""
    face = sys._getframe(1)  # the face's module code, running now: its compiled imports say where each name lives
    if face.f_globals.get("__name__") != package:
        raise ImportError(f"attach({package!r}) is called at the top level of {package}/__init__.py only")
    homes: dict[str, str] = {}
    twice = []
    module = ""
    for step in dis.get_instructions(face.f_code):
        if step.opname == "IMPORT_NAME":
            module = step.argval
        elif step.opname == "IMPORT_FROM" and module.startswith(f"{package}.") and step.argval not in face.f_globals:
            if homes.setdefault(step.argval, module) != module:
                twice.append(step.argval)
    if not homes or twice:
        raise ImportError(
            f"{package}: its face names {'a name from two modules: ' + ', '.join(twice) if twice else 'no name'}; "
            "import each public name once under `if TYPE_CHECKING:`, as `from module import name as name`"
        )

    def __getattr__(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    def __dir__() -> list[str]:
        return sorted(homes)

    return sorted(homes), __getattr__, __dir__
