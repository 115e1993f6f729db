"""The architecture's rules, kept by the code (docs/DEVELOPING.md, "Layers and faces").

- Layers: every part has a rank (`RANKS`); an import between two parts points down, to a lower rank. One that
  points up, or sideways (to another part of the same rank), fails, naming the file, the line and the rule; so
  does one a part must make through another (`NOT_DIRECTLY`: reporting reads the store through tracking).
- No import cycle between modules (function-level and type-checking imports count: a cycle hidden by a lazy
  import is still one).
- Faces: another folder's names are imported from the folder (`from dormant_tasks.store import read_table`), and
  only the names its `__init__.py` exports (its type-checking imports; `__all__` at run time); no part imports
  another's private (`_`) names.
- A face's form: each public name imported once, `name as name`, under `if TYPE_CHECKING:` (`dormant_tasks.face`);
  the interpreter's reading of it (its compiled code) and the type checker's (its source) agree.
- The map: every name `docs/DEVELOPING.md` lists for a module exists there.
- Size: no module of dormant_tasks/ or flows/ is over MAX_LINES lines (a longer one does several things).

The checks read the source with `ast` (no import runs), so a deliberately wrong import is caught before any test
imports it: `test_a_wrong_import_is_refused` shows it on a copy of the tree.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import dormant_tasks

ROOT = Path(dormant_tasks.__file__).resolve().parent.parent
FOLDERS = (
    "engine",
    "checkpoints",
    "store",
    "statistics",
    "tracking",
    "findings",
    "evaluation",
    "reporting",
    "publishing",
)  # parts with a face

# The layers, lowest first: a part imports only parts of a lower rank. The shared leaves sit below everything;
# `requests` is the base the parts' own requests build on; `names` says what a --model or a list option names.
RANKS = {
    "dormant_tasks.errors": 0,
    "dormant_tasks.version": 0,
    "dormant_tasks.text": 0,
    "dormant_tasks.face": 0,
    "dormant_tasks.devices": 1,
    "dormant_tasks.paths": 1,
    "dormant_tasks.progress": 1,
    "dormant_tasks.atomic": 1,
    "dormant_tasks.hashing": 1,
    "dormant_tasks.names": 1,
    "dormant_tasks.offline": 1,
    "dormant_tasks.options": 1,  # command-line options, declared as data (the requests' fields read it)
    "dormant_tasks.extras": 1,
    "dormant_tasks.requests": 2,
    "dormant_tasks.engine": 2,
    "dormant_tasks.checkpoints": 2,
    "dormant_tasks.store": 2,
    "dormant_tasks.statistics": 2,
    "dormant_tasks.grammar": 2,  # the options several commands share
    "dormant_tasks.tracking": 3,
    "dormant_tasks.outputs": 3,
    "dormant_tasks.findings": 4,
    "dormant_tasks.evaluation": 4,
    "dormant_tasks.tiny": 4,
    "dormant_tasks.cluster": 4,  # the Dask cluster of a track run (no Prefect)
    "dormant_tasks.reporting": 5,
    "dormant_tasks.publishing": 6,
    "dormant_tasks.api": 7,
    "dormant_tasks.run": 7,  # one track run (the CLI's, the flow's, a notebook's)
    "dormant_tasks": 8,  # the package's own face: the Python API and the version
    "flows": 9,
    "flows.cli": 10,
}
# Lower parts a part still may not use directly: what it needs of them comes through another part.
NOT_DIRECTLY = {
    "dormant_tasks.reporting": {"dormant_tasks.store": "read it through tracking (SeriesView) or evaluation"}
}


@dataclass(frozen=True)
class Import:
    path: Path  # the importing file
    line: int
    module: str  # the importing module
    target: str  # the imported module (a name imported from a package that is a module of it: that module)
    names: tuple[str, ...]  # the names imported from `target` (() for `import x`)


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for base in ("dormant_tasks", "flows") for p in sorted((root / base).rglob("*.py"))}


def imports(root: Path) -> list[Import]:
    """Every import of the project's own modules in dormant_tasks/ and flows/, wherever it stands."""
    known = modules(root)
    out = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out += [
                    Import(path, node.lineno, name, a.name, ())
                    for a in node.names
                    if a.name.split(".")[0] in ("dormant_tasks", "flows")
                ]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                    )
                if base.split(".")[0] not in ("dormant_tasks", "flows"):
                    continue
                plain = tuple(a.name for a in node.names if f"{base}.{a.name}" not in known)
                out += [
                    Import(path, node.lineno, name, f"{base}.{a.name}", ())
                    for a in node.names
                    if f"{base}.{a.name}" in known
                ]
                if plain:
                    out.append(Import(path, node.lineno, name, base, plain))
    return out


def part(module: str) -> str:
    """The part a module belongs to: its folder (`dormant_tasks.store`, `flows.cli`) or itself (a leaf)."""
    bits = module.split(".")
    if bits[0] == "flows":
        return "flows.cli" if bits[1:2] == ["cli"] else "flows"
    if len(bits) > 1 and bits[1] in FOLDERS:
        return ".".join(bits[:2])
    return module


def violations(root: Path) -> list[str]:
    """Each import that breaks a rule, as `file:line: what and why`."""
    out = []
    faces = {f"dormant_tasks.{f}": face_names(root, f) for f in FOLDERS}
    for imp in imports(root):
        mine, theirs = part(imp.module), part(imp.target)
        where = f"{imp.path.relative_to(root)}:{imp.line}"
        if mine == theirs:
            continue
        if mine not in RANKS or theirs not in RANKS:
            out.append(f"{where}: {mine if mine not in RANKS else theirs} has no layer: add it to RANKS and the docs")
            continue
        if RANKS[theirs] >= RANKS[mine]:
            way = "up" if RANKS[theirs] > RANKS[mine] else "sideways"
            out.append(
                f"{where}: {imp.module} (layer {RANKS[mine]}) imports {imp.target} (layer {RANKS[theirs]}): it points "
                f"{way}; move the code to the part that owns it, or pass the value in"
            )
        if theirs in NOT_DIRECTLY.get(mine, {}):
            out.append(f"{where}: {imp.module} imports {imp.target}: {NOT_DIRECTLY[mine][theirs]}")
        if theirs in faces:
            if imp.target != theirs:
                out.append(
                    f"{where}: {imp.module} imports {imp.target}: import from the face, `from {theirs} import ...`"
                )
            else:
                unknown = [n for n in imp.names if n not in faces[theirs]]
                if unknown:
                    out.append(
                        f"{where}: {', '.join(unknown)} not in {theirs}.__all__: add it to the face, or keep it inside"
                    )
        private = [n for n in imp.names if n.startswith("_") and n != "__version__"]
        if private:
            out.append(f"{where}: {imp.module} imports {imp.target}'s private {', '.join(private)}")
    return out


def read_face(root: Path, package: str) -> dict[str, str]:
    """{public name: its module} of the face `package` (`dormant_tasks`, `dormant_tasks.store`, ...) in the tree at
    `root`: its imports under `if TYPE_CHECKING:` (see `dormant_tasks.face`), read with `ast`."""
    tree = ast.parse((root / package.replace(".", "/") / "__init__.py").read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: stmt.module or ""
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
    }


def face_names(root: Path, folder: str) -> set[str]:
    return set(read_face(root, f"dormant_tasks.{folder}"))


def cycles(root: Path) -> list[list[str]]:
    """The import cycles between modules (strongly connected groups of more than one module)."""
    graph: dict[str, set[str]] = {m: set() for m in modules(root)}
    for imp in imports(root):
        if imp.target in graph and imp.target != imp.module:
            graph[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


MAX_LINES = 600


def long_modules(root: Path) -> dict[str, int]:
    """Every module of dormant_tasks/ and flows/ longer than MAX_LINES lines, with its length."""
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules(root).items()}
    return {name: n for name, n in lengths.items() if n > MAX_LINES}


def test_no_module_is_over_600_lines(tmp_path):
    assert long_modules(ROOT) == {}
    for base in ("dormant_tasks", "flows"):
        (tmp_path / base / "part").mkdir(parents=True)
    (tmp_path / "dormant_tasks" / "part" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "flows" / "part" / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert long_modules(tmp_path) == {"dormant_tasks.part.long": MAX_LINES + 1}


def test_every_part_has_a_layer_and_imports_point_down_through_faces():
    assert violations(ROOT) == []


def test_no_import_cycle_between_modules():
    assert cycles(ROOT) == []


def test_a_wrong_import_is_refused(tmp_path):
    """A copy of the tree with one import of each wrong kind: each is named, with its rule."""
    for base in ("dormant_tasks", "flows"):
        shutil.copytree(ROOT / base, tmp_path / base, ignore=shutil.ignore_patterns("__pycache__", "data"))
    assert violations(tmp_path) == [] and cycles(tmp_path) == []

    def add(rel: str, line: str) -> None:
        path = tmp_path / rel
        path.write_text(path.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")

    add("dormant_tasks/store/io.py", "from dormant_tasks.tracking import SeriesView")  # up
    add("dormant_tasks/engine/scoring.py", "from dormant_tasks.checkpoints import Revision")  # sideways
    add("dormant_tasks/reporting/figures.py", "from dormant_tasks.tracking.series import SeriesView")  # past the face
    add("dormant_tasks/evaluation/metric.py", "from dormant_tasks.tracking import plan_series_of_nothing")  # not public
    add("dormant_tasks/reporting/texts.py", "from dormant_tasks.store import read_table")  # past tracking
    add("dormant_tasks/tracking/masks.py", "from dormant_tasks.tracking.tracker import TrackResult")  # a cycle
    found = violations(tmp_path)
    assert any("store/io.py" in v and "points up" in v for v in found), found
    assert any("engine/scoring.py" in v and "points sideways" in v for v in found), found
    assert any("reporting/figures.py" in v and "import from the face" in v for v in found), found
    assert any(
        "evaluation/metric.py" in v and "plan_series_of_nothing not in dormant_tasks.tracking.__all__" in v
        for v in found
    )
    assert any("reporting/texts.py" in v and "read it through tracking" in v for v in found), found
    assert len(found) == 5, found
    assert any("dormant_tasks.tracking.masks" in group for group in cycles(tmp_path))


FACES = ["dormant_tasks", *(f"dormant_tasks.{f}" for f in FOLDERS)]


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's isort order of imported names: constants, then classes, then the rest."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def face_faults(root: Path, package: str) -> list[str]:
    """What is wrong with the imports of a face (`dormant_tasks.face`): each public name is imported once under
    `if TYPE_CHECKING:`, from a module of its own folder, as `name as name` (mypy --strict re-exports no other form),
    the modules and the names of each import sorted."""
    tree = ast.parse((root / package.replace(".", "/") / "__init__.py").read_text(encoding="utf-8"))
    blocks = [
        n for n in tree.body if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
    ]
    if len(blocks) != 1:
        return [f"{package}: {len(blocks)} `if TYPE_CHECKING:` blocks; its public names go in one"]
    faults, modules_seen = [], []
    for stmt in blocks[0].body:
        if not isinstance(stmt, ast.ImportFrom) or not (stmt.module or "").startswith(f"{package}.") or stmt.level:
            faults.append(f"{package}, line {stmt.lineno}: only `from {package}.<module> import name as name` here")
            continue
        modules_seen.append(stmt.module)
        names = [a.name for a in stmt.names]
        unpaired = [f"{a.name} as {a.asname}" if a.asname else a.name for a in stmt.names if a.asname != a.name]
        if unpaired:
            faults.append(
                f"{package}: {', '.join(unpaired)} from {stmt.module}: write each as `name as name` (the re-export "
                "mypy --strict and ruff read)"
            )
        if names != sorted(names, key=_isort_key):
            faults.append(f"{package}: sort the names imported from {stmt.module}: {sorted(names, key=_isort_key)}")
    if modules_seen != sorted(set(modules_seen)):
        faults.append(f"{package}: one import per module, the modules sorted")
    return faults


def test_each_face_imports_each_public_name_once_as_a_re_export():
    assert [fault for package in FACES for fault in face_faults(ROOT, package)] == []


def test_a_face_written_wrong_is_named(tmp_path):
    shutil.copytree(
        ROOT / "dormant_tasks", tmp_path / "dormant_tasks", ignore=shutil.ignore_patterns("__pycache__", "data")
    )
    face = tmp_path / "dormant_tasks" / "findings" / "__init__.py"
    text = face.read_text(encoding="utf-8")
    face.write_text(text.replace("EARLY as EARLY", "EARLY").replace("WELCH as WELCH", "WELCH as W"), encoding="utf-8")
    assert face_faults(tmp_path, "dormant_tasks.findings") == [
        "dormant_tasks.findings: EARLY from dormant_tasks.findings.dynamics: write each as `name as name` (the "
        "re-export mypy --strict and ruff read)",
        "dormant_tasks.findings: WELCH as W from dormant_tasks.findings.replication: write each as `name as name` "
        "(the re-export mypy --strict and ruff read)",
    ]


def test_the_interpreter_and_the_type_checker_read_the_same_names_from_each_face():
    """`attach` reads a face's imports from its compiled code, the type checker (and `read_face`) from its source:
    both give each name the same module."""
    for package in FACES:
        face = importlib.import_module(package)
        typed = read_face(ROOT, package)
        assert face.__all__ == sorted(face.__all__) and face.__all__, package
        only_typed, only_run = sorted(set(typed) - set(face.__all__)), sorted(set(face.__all__) - set(typed))
        assert not only_typed and not only_run, (
            f"{package}: only for the type checker: {only_typed}; only at run time: {only_run}"
        )
        for name, module in typed.items():
            assert getattr(face, name) is getattr(importlib.import_module(module), name), f"{package}.{name}"


def _run_face(source: str) -> None:
    """Runs `source` as the `__init__.py` of a face `dormant_tasks.somewhere`."""
    exec(compile(source, "somewhere/__init__.py", "exec"), {"__name__": "dormant_tasks.somewhere"})


def test_a_face_that_names_nothing_or_a_name_twice_does_not_import():
    head = "from typing import TYPE_CHECKING\nfrom dormant_tasks.face import attach\n"
    with pytest.raises(ImportError, match="names no name"):
        _run_face(head + "__all__, __getattr__, __dir__ = attach(__name__)\n")
    twice = "if TYPE_CHECKING:\n    from dormant_tasks.somewhere.a import x as x\n    from dormant_tasks.somewhere.b import x as x\n"
    with pytest.raises(ImportError, match="a name from two modules: x"):
        _run_face(head + twice + "__all__, __getattr__, __dir__ = attach(__name__)\n")
    with pytest.raises(ImportError, match="top level"):
        _run_face(head + "attach('dormant_tasks.elsewhere')\n")


def test_each_face_exports_what_it_lists_and_loads_nothing_until_asked():
    for folder in FOLDERS:
        face = importlib.import_module(f"dormant_tasks.{folder}")
        assert face.__doc__ and len(face.__doc__.strip().splitlines()) <= 6, folder  # a few lines on the part
        assert sorted(face.__all__) == sorted(face_names(ROOT, folder)) and face.__all__, folder
        submodules = {p.stem for p in (ROOT / "dormant_tasks" / folder).glob("*.py")}
        assert not submodules & set(face.__all__), f"{folder}: a public name that is also a module's name"
        for name in face.__all__:
            assert getattr(face, name) is not None, f"dormant_tasks.{folder}.{name}"
        with pytest.raises(AttributeError):
            face.no_such_name  # noqa: B018


def _doc_section(title: str) -> str:
    text = (ROOT / "docs" / "DEVELOPING.md").read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start : end if end > 0 else None]


def test_the_docs_module_table_names_what_each_module_has():
    """`docs/DEVELOPING.md`, "Modules and their public seams": every name in a row's last column exists in that
    module (the table drifted from the code once; this keeps it honest)."""
    rows = re.findall(r"^\| `([\w/]+)` \| [^|]* \| (.*) \|$", _doc_section("## Modules and their public seams"), re.M)
    assert len(rows) > 30
    for module, names in rows:
        mod = importlib.import_module("dormant_tasks." + module.replace("/", "."))
        for token in re.findall(r"`([^`]+)`", names):
            name = re.fullmatch(r"([A-Za-z_]\w*)(\(.*\))?( -> .*)?", token)  # a name, a call or a call's result
            if name:  # (paths, commands, values and `.attribute`s of a listed name are prose)
                assert hasattr(mod, name.group(1)), f"docs/DEVELOPING.md lists `{token}` for {module}, which lacks it"


# Module-level names that every module may define for itself: its logger.
PER_MODULE = {"log"}


def _is_type_variable(value: ast.expr) -> bool:
    """`T = TypeVar("T")`: a module's own type variable, a name for that module's signatures alone."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "TypeVar"


def defined_twice(root: Path) -> dict[str, list[str]]:
    """{public name: the library modules that define it at module level}, for names defined in more than one."""
    homes: dict[str, list[str]] = {}
    for name, path in modules(root).items():
        if not name.startswith("dormant_tasks") or path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign) and not _is_type_variable(node.value):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                continue
            for n in names:
                if not n.startswith("_") and n not in PER_MODULE:
                    homes.setdefault(n, []).append(name)
    return {n: sorted(set(m)) for n, m in homes.items() if len(set(m)) > 1}


def test_each_public_name_is_defined_once_in_the_library():
    """One name, one thing: a public name defined in two modules (two `Series`, two `open_store`) reads as one
    thing at the call site and is two; rename one, or make it private to its module."""
    assert defined_twice(ROOT) == {}
