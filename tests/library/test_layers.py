"""The architecture's rules, kept by the code (docs/DEVELOPING.md, "Layers and faces").

- Layers: every part has a rank (`RANKS`); an import between two parts points down, to a lower rank. One that
  points up, or sideways (to another part of the same rank), fails, naming the file, the line and the rule; so
  does one a part must make through another (`NOT_DIRECTLY`: reporting reads the store through tracking).
- No import cycle between modules (function-level and type-checking imports count: a cycle hidden by a lazy
  import is still one).
- Faces: another folder's names are imported from the folder (`from dormant_tasks.store import read_table`), and
  only the names its `__init__.py` exports (`__all__`); no part imports another's private (`_`) names.
- The map: every name `docs/DEVELOPING.md` lists for a face or a module exists there.

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
    "dormant_tasks.requests": 1,
    "dormant_tasks.engine": 2,
    "dormant_tasks.checkpoints": 2,
    "dormant_tasks.store": 2,
    "dormant_tasks.statistics": 2,
    "dormant_tasks.tracking": 3,
    "dormant_tasks.outputs": 3,
    "dormant_tasks.findings": 4,
    "dormant_tasks.evaluation": 4,
    "dormant_tasks.tiny": 4,
    "dormant_tasks.reporting": 5,
    "dormant_tasks.publishing": 6,
    "dormant_tasks.api": 7,
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


@dataclass(frozen=True)
class Face:
    """A face's three lists of its public names, read from its `__init__.py` (see `dormant_tasks.face`)."""

    exported: tuple[str, ...]  # the literal `__all__`
    typed: dict[str, str]  # {name: module} of the imports under `if TYPE_CHECKING:`
    attached: dict[str, str]  # {name: module} of the map given to `attach`


def read_face(root: Path, package: str) -> Face:
    """The face of `package` (`dormant_tasks`, `dormant_tasks.store`, ...) in the tree at `root`."""
    tree = ast.parse((root / package.replace(".", "/") / "__init__.py").read_text(encoding="utf-8"))
    exported: tuple[str, ...] = ()
    typed: dict[str, str] = {}
    attached: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = tuple(ast.literal_eval(node.value))  # a literal, or this fails
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    typed.update({a.asname or a.name: stmt.module for a in stmt.names})
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Name) and call.func.id == "attach":
                submodules = ast.literal_eval(call.args[2])
                attached = {n: f"{package}.{m}" for m, names in submodules.items() for n in names}
    return Face(exported, typed, attached)


def face_names(root: Path, folder: str) -> set[str]:
    return set(read_face(root, f"dormant_tasks.{folder}").exported)


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


def test_each_face_lists_its_names_once_in_each_of_its_three_lists():
    """`__all__` (a literal), the type-checking imports and the map given to `attach` name the same names, each
    at the same module: a name added to one list only is caught here (and `attach` refuses the map at import)."""
    for package in ["dormant_tasks", *(f"dormant_tasks.{f}" for f in FOLDERS)]:
        face = read_face(ROOT, package)
        assert face.exported and len(set(face.exported)) == len(face.exported), package
        assert list(face.exported) == sorted(face.exported), f"{package}: keep __all__ sorted"
        assert face.typed == face.attached, (package, sorted(set(face.typed.items()) ^ set(face.attached.items())))
        assert set(face.exported) == set(face.typed), (package, sorted(set(face.exported) ^ set(face.typed)))


def test_a_face_whose_map_differs_from_its_all_does_not_import():
    from dormant_tasks.face import attach

    with pytest.raises(ImportError, match=r"only in __all__: \['b'\]; only in the map: \['c'\]"):
        attach("dormant_tasks.somewhere", ["a", "b"], {"m": ["a", "c"]})
    with pytest.raises(ImportError, match="1 named twice"):
        attach("dormant_tasks.somewhere", ["a"], {"m": ["a"], "n": ["a"]})


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


def test_the_docs_face_table_names_what_each_face_exports():
    """`docs/DEVELOPING.md`, "Layers and faces": one row per part with its layer and public names; each listed name
    exists in that face, and each face's names are listed."""
    rows = re.findall(r"^\| `dormant_tasks\.(\w+)` \| (\d+) \| (.*) \|$", _doc_section("## Layers and faces"), re.M)
    assert {r[0] for r in rows} == set(FOLDERS)
    for folder, rank, names in rows:
        assert int(rank) == RANKS[f"dormant_tasks.{folder}"], folder
        listed = set(re.findall(r"`(\w+)`", names))
        assert listed == face_names(ROOT, folder), (folder, sorted(listed ^ face_names(ROOT, folder)))


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
