"""The layout stays readable: small modules, short functions, no import cycle between modules."""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

from tests.testkit import parsed_source

PKG = Path(__file__).resolve().parent.parent / "planrun"
# A backstop against a module that has become several, not a target: modules split at seams
# (one responsibility each), and ~500 lines is the size at which to look for one.
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
# One worker walks every module once for all of them (tests/test_events_documented.py too).
pytestmark = pytest.mark.xdist_group("planrun-source")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every planrun module `name` imports, at module level or inside functions (not under
    `if TYPE_CHECKING:`: those are for the type checker and never run)."""
    tree = parsed_source(path)
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out: set[str] = set()
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                mod = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                out.add(target)
    return out


def test_modules_are_small() -> None:
    big = {
        n: len(p.read_text().splitlines())
        for n, p in _modules().items()
        if len(p.read_text().splitlines()) > MAX_MODULE_LINES
    }
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


def test_functions_are_short() -> None:
    long = []
    for name, path in _modules().items():
        for node in ast.walk(parsed_source(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name} ({size} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_import_cycle() -> None:
    mods = _modules()
    known = set(mods)
    graph = {n: _imports(n, p, known) for n, p in mods.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_every_module_is_in_the_module_map() -> None:
    """docs/modules.md, the module map, names every module, and no module that is gone."""
    doc = (PKG.parent / "docs" / "modules.md").read_text()
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", doc, re.M))
    present = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")}
    assert sorted(present - listed) == [], "modules missing from docs/modules.md"
    assert sorted(listed - present) == [], "docs/modules.md lists modules that are gone"


def test_no_module_imports_another_modules_private_names() -> None:
    """A `_name` is its module's own: another module that needs it needs a public name."""
    found = []
    for name, path in _modules().items():
        for node in ast.walk(parsed_source(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("planrun"):
                found += [
                    f"{name}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert found == []
