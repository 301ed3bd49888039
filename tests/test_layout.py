"""The project's structural rules, checked on the source. Each checker is also run on a planted
violation, so a rule that stopped looking would fail here rather than pass silently."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "viz", "ui")
STREAMLIT_FREE = ("models", "viz", "ui/runtime", "ui/state", "ui/keys.py", "ui/text.py")


def python_files(*places: str) -> list[Path]:
    found: list[Path] = []
    for place in places:
        path = ROOT / place
        found += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return found


def modules() -> dict[str, Path]:
    found = {}
    for path in python_files(*PACKAGES):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported_names(source: str) -> list[str]:
    """Every module name an import statement in ``source`` names (any depth, any place)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def imports(path: Path, known: set[str]) -> set[str]:
    """Project modules ``path`` imports at module level or inside functions."""
    out = set()
    for name in imported_names(path.read_text(encoding="utf-8")):
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
                return [*stack[stack.index(nxt) :], nxt]
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
        graph[name] = {
            m
            for m in imports(path, set(found))
            if m != name and not (path.name == "__init__.py" and m.startswith(name + "."))
        }
    assert find_cycle(graph) is None


def forbidden_imports(source: str, banned: tuple[str, ...]) -> list[str]:
    return [
        name
        for name in imported_names(source)
        if any(name == b or name.startswith(b + ".") for b in banned)
    ]


def test_the_import_checker_sees_a_planted_import():
    assert forbidden_imports("def f():\n    from ui.session import x\n", ("ui",))
    assert forbidden_imports("import streamlit as st", ("streamlit",))
    assert not forbidden_imports("import uikit", ("ui",))


@pytest.mark.parametrize(
    ("places", "banned"),
    [
        (STREAMLIT_FREE, ("streamlit",)),
        (("models",), ("viz", "ui", "pages", "streamlit")),
        (("viz",), ("ui", "pages", "streamlit")),
        (("models", "viz", "ui", "pages", "app.py", "tests", "benchmarks"), ("pages",)),
    ],
)
def test_each_layer_imports_only_what_is_below_it(places, banned):
    for path in python_files(*places):
        assert not forbidden_imports(path.read_text(encoding="utf-8"), banned), path


def test_only_the_forward_module_spells_hook_names():
    spelled = [
        path.relative_to(ROOT).as_posix()
        for path in python_files(*PACKAGES, "pages")
        if re.search(r"[\"']blocks\.", path.read_text(encoding="utf-8"))
    ]
    assert spelled == ["models/model/forward.py"]


def edits_sys_path(tree: ast.AST) -> bool:
    """Whether the code calls a method of ``sys.path`` (insert, append, extend, ...)."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "path"
        and isinstance(node.func.value.value, ast.Name)
        and node.func.value.value.id == "sys"
        for node in ast.walk(tree)
    )


def test_the_sys_path_check_sees_an_edit():
    assert edits_sys_path(ast.parse("import sys\nsys.path.append('x')"))
    assert not edits_sys_path(ast.parse("import os\nos.path.join('x', 'y')"))


def test_no_sys_path_edits():
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts or "artifacts" in path.parts:
            continue
        assert not edits_sys_path(ast.parse(path.read_text(encoding="utf-8"))), path


# --- package docstrings list exactly what the package holds ---------------------------------


def listed_modules(doc: str, package: str) -> set[str]:
    """Modules a package docstring names as ``:mod:`package.x``` (direct children only)."""
    names = re.findall(r":mod:`([\w.]+)`", doc)
    return {
        n.split(".")[len(package.split("."))]
        for n in names
        if n.startswith(package + ".") and n.count(".") >= package.count(".") + 1
    }


def held_modules(folder: Path) -> set[str]:
    """Modules and subpackages directly in ``folder`` (``__main__`` counts; data folders not)."""
    held = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    held |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return held


def test_the_docstring_checker_sees_a_missing_module(tmp_path):
    (tmp_path / "a.py").write_text("")
    (tmp_path / "b.py").write_text("")
    assert held_modules(tmp_path) - listed_modules("- :mod:`pkg.a` -- one", "pkg") == {"b"}


@pytest.mark.parametrize(
    "init",
    [p for p in python_files(*PACKAGES) if p.name == "__init__.py"],
    ids=lambda p: p.parent.relative_to(ROOT).as_posix(),
)
def test_every_package_lists_exactly_its_modules(init):
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    package = ".".join(init.parent.relative_to(ROOT).parts)
    assert len(doc.split()) >= 4, init
    held = held_modules(init.parent)
    if package == "models.bundled":  # a model checkpoint with its training script
        held -= {"train"}
    assert listed_modules(doc, package) == held, init


# --- the app is not installed under generic names ------------------------------------------


def test_top_level_names_resolve_only_to_this_repository(tmp_path):
    """Outside the repository, ``models``, ``viz``, ``ui`` and ``tests`` import nothing: no
    installed distribution provides them (the app runs from its folder, never installed)."""
    code = (
        "import importlib.util as u\n"
        "for name in ('models', 'viz', 'ui', 'tests', 'pages', 'app'):\n"
        "    spec = u.find_spec(name)\n"
        "    print(name, spec.origin if spec else None)\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.split("\n")
    leaks = [line for line in out if line and not line.endswith(" None")]
    assert not leaks, leaks


# --- settings are read in one place --------------------------------------------------------


def reads_atlas_env(source: str) -> bool:
    return bool(re.search(r"(environ|getenv)[^\n]*[\"']ATLAS_", source))


def test_the_settings_checker_sees_a_planted_read():
    assert reads_atlas_env('x = os.environ.get("ATLAS_IDLE_S")')
    assert not reads_atlas_env('x = os.environ.get("HF_HUB_OFFLINE")')


def test_only_the_settings_module_reads_atlas_variables():
    readers = [
        path.relative_to(ROOT).as_posix()
        for path in python_files(*PACKAGES, "pages", "app.py")
        if reads_atlas_env(path.read_text(encoding="utf-8"))
    ]
    assert readers == []  # Settings.from_env reads them through each field's metadata


# --- session writes ---------------------------------------------------------------------------

MUTATORS = {"pop", "setdefault", "update", "clear", "popitem", "__setitem__", "__delitem__"}
CONTAINER_MUTATORS = {"add", "discard", "remove", "append", "extend", "update", "clear", "pop"}


def session_writes(source: str) -> list[int]:
    """Lines that write Streamlit's session state: an item or attribute assigned or deleted on
    ``st.session_state`` (or a name bound to it), one of its mutating methods called or passed
    on (``on_click=st.session_state.__setitem__``), or a value read from it mutated in place
    (``st.session_state.get(k, set()).add(x)``)."""
    tree = ast.parse(source)
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts, strict=False))
                else:
                    pairs = [(target, node.value)]
                aliases |= {
                    name.id
                    for name, value in pairs
                    if isinstance(name, ast.Name) and is_session(value, set())
                }

    def session(node: ast.AST | None) -> bool:
        return is_session(node, aliases)

    lines = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        if any(isinstance(t, ast.Subscript | ast.Attribute) and session(t.value) for t in flat):
            lines.append(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr in MUTATORS and session(node.value):
            lines.append(node.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CONTAINER_MUTATORS
            and session(read_from(node.func.value))
        ):
            lines.append(node.lineno)
    return sorted(set(lines))


def read_from(node: ast.expr) -> ast.expr | None:
    """What ``node`` reads a value out of: ``x`` for ``x.get(k)`` or ``x[k]``, else None."""
    if isinstance(node, ast.Subscript):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.value
    return None


def is_session(node: ast.AST | None, aliases: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in aliases
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "session_state"
        and isinstance(node.value, ast.Name)
        and node.value.id == "st"
    )


@pytest.mark.parametrize(
    "planted",
    [
        "st.session_state['k'] = 1",
        "st.session_state.k = 1",
        "ss = st.session_state\nss['k'] = 1",
        "ss, n = st.session_state, 2\nss['a'], ss['b'] = 1, 2",
        "del st.session_state['k']",
        "st.session_state.pop('k', None)",
        "st.session_state.setdefault('k', set()).add(1)",
        "st.session_state.get('k', set()).discard(1)",
        "st.session_state['k'].append(1)",
        "st.button('go', on_click=st.session_state.__setitem__, args=('k', 1))",
        "st.session_state.update(k=1)",
    ],
)
def test_the_session_checker_sees_a_planted_write(planted):
    assert session_writes(planted)


def test_the_session_checker_lets_reads_be():
    source = "ss = st.session_state\nx = ss.get('k')\ny = st.session_state['k']\nz = 'k' in ss"
    assert session_writes(source) == []


def test_only_the_session_state_module_writes_the_session():
    writers = {
        path.relative_to(ROOT).as_posix(): lines
        for path in python_files("ui", "pages", "app.py")
        if (lines := session_writes(path.read_text(encoding="utf-8")))
    }
    assert set(writers) <= {"ui/session_state.py"}, writers


# --- the one door to a model -----------------------------------------------------------------


def calls_load(source: str) -> bool:
    """Whether code imports the model loader (``models.model.loading.load``) or ``boot``."""
    return any(
        name in ("models.model.loading.load", "models.model.loading.boot")
        for name in imported_names(source)
    )


def test_the_door_checker_sees_a_planted_loader():
    assert calls_load("from models.model.loading import LoadedModel, load")
    assert not calls_load("from models.model.loading import LoadedModel")


def test_only_the_model_store_loads_models_in_the_app():
    loaders = [
        path.relative_to(ROOT).as_posix()
        for path in python_files("ui", "pages", "app.py")
        if calls_load(path.read_text(encoding="utf-8"))
    ]
    assert loaders == ["ui/runtime/models.py"]


def reads_bridge(source: str) -> bool:
    """Whether code reads a ``.bridge`` attribute (the TransformerLens bridge, untyped)."""
    return any(
        isinstance(node, ast.Attribute) and node.attr == "bridge"
        for node in ast.walk(ast.parse(source))
    )


def test_the_bridge_checker_sees_a_planted_read():
    assert reads_bridge("x = model.bridge.blocks[0]")
    assert not reads_bridge("from models.model.weights import original\nx = original(model)")


def test_only_the_model_package_touches_the_bridge():
    """The rest of the core, the pages and the figures see a model through models.model's
    typed functions: the untyped bridge stays behind that door."""
    readers = [
        path.relative_to(ROOT).as_posix()
        for path in python_files("models", "viz", "ui", "pages", "app.py")
        if not path.relative_to(ROOT).as_posix().startswith("models/model/")
        and reads_bridge(path.read_text(encoding="utf-8"))
    ]
    assert readers == []


def bare_imported_names(source: str) -> set[str]:
    """Every name a module imports, without its module (``from x import a, b``: a and b)."""
    return {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_core_sees_a_model_through_its_handle_only():
    """Outside models.model a model is a ``ModelHandle`` (no bridge on it); only the model
    store names the concrete class, to check what its cache holds, and nothing but
    models.model asks for the bridge. Inside, only the loader reads the attribute itself."""
    concrete = {
        path.relative_to(ROOT).as_posix(): bare_imported_names(path.read_text(encoding="utf-8"))
        & {"LoadedModel", "bridge_of"}
        for path in python_files("models", "viz", "ui", "pages", "app.py", "benchmarks")
        if not path.relative_to(ROOT).as_posix().startswith("models/model/")
    }
    assert {path: names for path, names in concrete.items() if names} == {
        "ui/runtime/models.py": {"LoadedModel"}
    }
    direct = [
        path.relative_to(ROOT).as_posix()
        for path in python_files("models")
        if path.relative_to(ROOT).as_posix().startswith("models/model/")
        and reads_bridge(path.read_text(encoding="utf-8"))
    ]
    assert direct == ["models/model/loading.py"]


def test_only_the_policy_makes_an_allowed_spec():
    from models.model.spec import ModelSpec
    from ui.runtime.policy import AllowedSpec

    with pytest.raises(TypeError):
        AllowedSpec(ModelSpec("bundled"))
    makers = [
        path.relative_to(ROOT).as_posix()
        for path in python_files("ui", "pages", "app.py")
        if re.search(r"AllowedSpec\(", path.read_text(encoding="utf-8"))
        and path.name != "policy.py"
    ]
    assert makers == []


# --- widget and session keys come from ui.keys -----------------------------------------------


def literal_keys(source: str) -> list[str]:
    """String literals used as a widget ``key=`` or a ``session_state[...]`` index."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.keyword)
            and node.arg == "key"
            and isinstance(node.value, (ast.Constant, ast.JoinedStr))
        ):
            found.append(ast.unparse(node.value))
        if (
            isinstance(node, ast.Subscript)
            and "session_state" in ast.unparse(node.value)
            and isinstance(node.slice, (ast.Constant, ast.JoinedStr))
        ):
            found.append(ast.unparse(node.slice))
    return found


def test_the_key_checker_sees_planted_literals():
    assert sorted(literal_keys('st.button("x", key="mine")\nst.session_state["other"] = 1')) == [
        "'mine'",
        "'other'",
    ]
    assert not literal_keys("st.button('x', key=Keys.MINE)")


def test_widget_and_session_keys_come_from_one_module():
    for path in python_files("ui", "pages", "app.py"):
        if path.name == "keys.py":
            continue
        assert literal_keys(path.read_text(encoding="utf-8")) == [], path


# --- one name per idea ---------------------------------------------------------------------


def _is_alias_value(value: ast.expr) -> bool:
    """A value that makes a type: ``Literal[...]``, ``X[...]`` or ``A | B``."""
    return isinstance(value, ast.Subscript) or (
        isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr)
    )


def type_names(source: str) -> list[str]:
    """Public top-level types a module defines: classes, ``X: TypeAlias = ...`` and
    ``Xy = Literal[...]`` (or any other subscript or union bound to a capitalised name)."""
    names: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if ast.unparse(node.annotation).split(".")[-1] == "TypeAlias":
                names.append(node.target.id)
        elif isinstance(node, ast.Assign) and _is_alias_value(node.value):
            names += [
                t.id
                for t in node.targets
                if isinstance(t, ast.Name) and re.fullmatch(r"[A-Z][a-z]\w*", t.id)
            ]
    return [name for name in names if not name.startswith("_")]


def test_the_name_checker_sees_every_kind_of_type():
    source = (
        "from typing import Literal, TypeAlias\n"
        "class Pair: ...\n"
        "Side = Literal['a', 'b']\n"
        "Where: TypeAlias = int\n"
        "Either = int | str\n"
        "MAX_SIDE = 3\n"
        "class _Hidden: ...\n"
    )
    assert type_names(source) == ["Pair", "Side", "Where", "Either"]


def test_no_two_public_types_share_a_name():
    """One word per idea: a class or type alias name means one thing in models, viz and ui."""
    where: dict[str, list[str]] = {}
    for path in python_files(*PACKAGES):
        for name in type_names(path.read_text(encoding="utf-8")):
            where.setdefault(name, []).append(path.relative_to(ROOT).as_posix())
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, shared
