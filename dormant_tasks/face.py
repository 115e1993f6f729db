"""A part's face: the names other parts may import from it, loaded on first use.

Each folder of the library (`engine`, `checkpoints`, `store`, `tracking`, `evaluation`, `reporting`) writes its
public names out in its `__init__.py` three times, each for its own reader:
- `__all__`, a literal list: what `from part import *`, ruff and `mypy --strict` (its re-export rule) read;
- imports under `if TYPE_CHECKING:`: type checkers and readers see where each name is defined;
- the map `{submodule: [names]}` given to `attach`: the interpreter loads a name from its module on first use.

`attach` refuses a map that differs from `__all__` (the face then fails to import, in every test), and
`tests/library/test_layers.py` refuses type-checking imports that differ from both. Other parts import those
names from the folder (`from dormant_tasks.store import read_table`), never from its modules. Nothing is read from
a source file at run time, so the package imports from a wheel, a zip or `.pyc` files alone; and nothing is
imported until a name is first used, so `--help` and a light import of one part load no torch, pyarrow or
matplotlib. The pattern is scientific-python's SPEC 1 (`lazy_loader.attach`) with its map written out.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence


def attach(
    package: str, exported: Sequence[str], submodules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` of a folder's `__init__.py`: a public name is taken from its module (`submodules`
    maps a module of the folder to the names it defines) when first asked for, each time from the module, so a test
    that patches the module is seen. ImportError when the map and `exported` (the face's `__all__`) differ."""
    homes = {name: f"{package}.{module}" for module, names in submodules.items() for name in names}
    listed = sum(len(names) for names in submodules.values())
    if sorted(homes) != sorted(exported) or listed != len(homes):
        only_all, only_map = sorted(set(exported) - set(homes)), sorted(set(homes) - set(exported))
        raise ImportError(
            f"{package}: its face's __all__ and its map differ (only in __all__: {only_all}; only in the map: "
            f"{only_map}; {listed - len(homes)} named twice in the map); list each public name once in both"
        )

    def __getattr__(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    def __dir__() -> list[str]:
        return sorted(homes)

    return __getattr__, __dir__
