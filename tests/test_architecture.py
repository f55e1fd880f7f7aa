"""The architecture itself: no import cycles in the core, no pynvim in it, and only
``cli/`` (and the ``python -m nodecode`` entry point) imports the CLI.

Every import counts — module level, inside functions and under ``TYPE_CHECKING``
alike — because each is a dependency a reader must follow. An import of
``pkg.mod`` depends on that module; ``from pkg import name`` depends on
``pkg.name`` when that is a module, else on ``pkg`` (its ``__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "python" / "nodecode"
ENTRY_POINTS = {"nodecode.__main__"}  # `python -m nodecode` runs the CLI's main


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(root, p): p for p in sorted(root.rglob("*.py"))}


def _absolute(name: str, node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(root: Path) -> dict[str, set[str]]:
    """Each core module → the core modules it imports, anywhere in its body."""
    known = modules(root)
    top = root.name
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(name, node, package)
                for alias in node.names:
                    child = f"{source}.{alias.name}"
                    deps.add(child if child in known else source)
        graph[name] = {d for d in deps if d == top or d.startswith(top + ".")} - {name}
    return graph


def raw_imports(root: Path) -> dict[str, set[str]]:
    """Each core module → every top-level name it imports (pynvim, httpx, …)."""
    out: dict[str, set[str]] = {}
    for name, path in modules(root).items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
        out[name] = found
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each
    shown as one cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_one_cycle(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return sorted(component)


def test_the_core_has_no_import_cycle():
    found = cycles(imports(CORE))
    assert not found, "import cycles: " + "; ".join(" → ".join(c) for c in found)


def test_the_core_never_imports_pynvim():
    offenders = sorted(name for name, names in raw_imports(CORE).items() if "pynvim" in names)
    assert not offenders, f"pynvim imported by the core: {', '.join(offenders)}"


def test_only_cli_imports_the_cli():
    offenders = sorted(
        f"{name} imports {dep}"
        for name, deps in imports(CORE).items()
        for dep in deps
        if (dep == "nodecode.cli" or dep.startswith("nodecode.cli."))
        and not (name == "nodecode.cli" or name.startswith("nodecode.cli."))
        and name not in ENTRY_POINTS
    )
    assert not offenders, "; ".join(offenders)


def test_only_the_cli_and_the_host_build_the_app():
    allowed = ("nodecode.cli", "nodecode.host", "nodecode.agent", "nodecode.demo")
    offenders = sorted(
        f"{name} imports nodecode.app"
        for name, deps in imports(CORE).items()
        if "nodecode.app" in deps
        and not any(name == a or name.startswith(a + ".") for a in allowed)
    )
    assert not offenders, "; ".join(offenders)


# -- the checks themselves catch what they are for --------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "nodecode"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    "files",
    [
        {"__init__.py": "", "a.py": "from nodecode import b\n", "b.py": "import nodecode.a\n"},
        {  # through a function-level import and a TYPE_CHECKING one
            "__init__.py": "",
            "a.py": "def f():\n    from nodecode.b import x\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import y\n",
            "c.py": "from .a import f\n",
        },
        {  # a child importing its package, whose __init__ imports the child
            "__init__.py": "",
            "cli/__init__.py": "from nodecode.cli import sessions\n",
            "cli/sessions.py": "from nodecode.cli import EXIT_OK\n",
        },
    ],
)
def test_a_cycle_is_found_wherever_its_imports_sit(tmp_path, files):
    assert cycles(imports(_tree(tmp_path, files)))


def test_a_package_importing_its_own_children_is_no_cycle(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "cli/__init__.py": "from nodecode.cli import sessions\n",
            "cli/common.py": "",
            "cli/sessions.py": "from nodecode.cli.common import x\n",
        },
    )
    assert cycles(imports(root)) == []
