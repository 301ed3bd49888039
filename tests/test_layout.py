"""The project's structural rules, checked on the source: no import cycles, one module that
spells hook names, no Streamlit below pages/, no sys.path edits, a docstring on every package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "viz", "ui")


def modules() -> dict[str, Path]:
    found = {"app_state": ROOT / "app_state.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """Project modules ``path`` imports at module level or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_between_project_modules():
    found = modules()
    graph = {}
    for name, path in found.items():
        # a package's own __init__ re-exporting its modules is not a cycle with them
        graph[name] = {m for m in imports(path, set(found)) if m != name
                       and not (path.name == "__init__.py" and m.startswith(name + "."))}
    assert find_cycle(graph) is None


def test_models_and_viz_never_import_streamlit():
    for package in ("models", "viz"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"^\s*(import|from) streamlit", text, re.M), path


def test_only_the_forward_module_spells_hook_names():
    spelled = [path.relative_to(ROOT).as_posix() for package in PACKAGES + ("pages",)
               for path in (ROOT / package).rglob("*.py")
               if re.search(r"[\"']blocks\.", path.read_text(encoding="utf-8"))]
    assert spelled == ["models/model/forward.py"]


def edits_sys_path(tree: ast.AST) -> bool:
    """Whether the code calls a method of ``sys.path`` (insert, append, extend, ...)."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "path"
               and isinstance(node.func.value.value, ast.Name) and node.func.value.value.id == "sys"
               for node in ast.walk(tree))


def test_the_sys_path_check_sees_an_edit():
    assert edits_sys_path(ast.parse("import sys\nsys.path.append('x')"))
    assert not edits_sys_path(ast.parse("import os\nos.path.join('x', 'y')"))


def test_no_sys_path_edits():
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts or "artifacts" in path.parts:
            continue
        assert not edits_sys_path(ast.parse(path.read_text(encoding="utf-8"))), path


def test_every_package_says_what_it_holds():
    for package in PACKAGES:
        for init in (ROOT / package).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc and len(doc.split()) >= 4, init
