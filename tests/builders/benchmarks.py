"""What the benchmark guards share: a script of `benchmarks/` imported from its file, and a value of its tables."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_benchmark(name: str):
    """benchmarks/NAME.py (a script, not a package module), imported from its file."""
    sys.path.insert(0, str(REPO / "benchmarks"))  # (a script may import its neighbours)
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def table_value(line: str) -> float:
    """The rate of a table row `| ... | 0.049 +- 0.004 | ...`."""
    return float(re.search(r"\| ([\d.]+) \+-", line).group(1))
