"""The architecture itself: no import cycles in the core, between modules or between
packages; no pynvim in it; only ``cli/`` (and the ``python -m nodecode`` entry
point) imports the CLI; no provider type named outside ``providers/``; and
``cells/`` (the reader, forms, evaluator, approval, environment) imports nothing
of nodecode above it.

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
# What cells/ may import of nodecode: the modules below every layer, and itself.
CELLS_MAY_IMPORT = ("nodecode.errors", "nodecode.paths", "nodecode.words", "nodecode.cells")


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


def packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph of the core's first-level units: each package (``nodecode.log``)
    and each module directly in it (``nodecode.app``) is one node, depending on
    every unit any of its modules imports."""

    def unit(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {}
    for name, deps in graph.items():
        out.setdefault(unit(name), set()).update(unit(d) for d in deps)
    return {u: deps - {u} for u, deps in out.items()}


def test_no_package_imports_a_package_that_imports_it_back():
    found = cycles(packages(imports(CORE)))
    assert not found, "package cycles: " + "; ".join(" → ".join(c) for c in found)


# Where a provider type may be named: the wire formats themselves, the loopback
# server that speaks them, and the demo's built-in choice of provider.
PROVIDER_NAMES = {"anthropic", "openai"}
MAY_NAME_PROVIDERS = ("nodecode.providers", "nodecode.loopback", "nodecode.demo")


def provider_literals(root: Path) -> list[str]:
    """Each comparison (``==``, ``!=``, ``in``, ``not in``, a ``case``) with a provider
    type's name, outside the places that own them: ``module:line``."""
    found = []
    for name, path in modules(root).items():
        if any(name == p or name.startswith(p + ".") for p in MAY_NAME_PROVIDERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.MatchValue):
                operands = [node.value]
            else:
                continue
            if any(_names_a_provider(o) for o in operands):
                found.append(f"{name}:{node.lineno}")
    return found


def _names_a_provider(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in PROVIDER_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_provider(e) for e in node.elts)
    return False


def test_only_the_providers_compare_with_a_provider_type():
    found = provider_literals(CORE)
    assert not found, (
        "a provider type is compared outside providers/ (ask the wire format instead): "
        + ", ".join(found)
    )


def below(graph: dict[str, set[str]], package: str, allowed: tuple[str, ...]) -> list[str]:
    """'a imports b' for every import of a module of ``package`` that is not one of
    ``allowed`` (a module or a package, with everything in it)."""

    def inside(name: str, prefix: str) -> bool:
        return name == prefix or name.startswith(prefix + ".")

    return sorted(
        f"{name} imports {dep}"
        for name, deps in graph.items()
        if inside(name, package)
        for dep in deps
        if not any(inside(dep, a) for a in allowed)
    )


def test_cells_imports_nothing_above_it():
    offenders = below(imports(CORE), "nodecode.cells", CELLS_MAY_IMPORT)
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


@pytest.mark.parametrize(
    "files",
    [
        {  # one package's module imports another's, whose other module imports it back
            "__init__.py": "",
            "log/__init__.py": "",
            "log/store.py": "from nodecode.views import status\n",
            "log/turns.py": "",
            "views/__init__.py": "",
            "views/status.py": "",
            "views/tree.py": "def f():\n    import nodecode.log.turns\n",
        },
        {  # through a TYPE_CHECKING import, with a module directly in the core
            "__init__.py": "",
            "app.py": "from nodecode.log.store import x\n",
            "log/__init__.py": "",
            "log/store.py": "x = 1\n",
            "log/turns.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import nodecode.app\n"
            ),
        },
    ],
)
def test_a_package_cycle_is_found_though_no_module_cycle_is(tmp_path, files):
    graph = imports(_tree(tmp_path, files))
    assert cycles(graph) == []
    assert cycles(packages(graph))


@pytest.mark.parametrize(
    "code",
    [
        'def f(t):\n    return t == "anthropic"\n',
        'def f(t):\n    return "openai" != t\n',
        'def f(t):\n    return t in ("anthropic", "openai")\n',
        'def f(t):\n    match t:\n        case "openai":\n            return 1\n',
    ],
)
def test_a_provider_literal_outside_providers_is_found(tmp_path, code):
    root = _tree(tmp_path, {"__init__.py": "", "budget/__init__.py": "", "budget/meter.py": code})
    assert provider_literals(root) == [
        "nodecode.budget.meter:2" if "match" not in code else "nodecode.budget.meter:3"
    ]


def test_a_provider_literal_inside_providers_is_theirs(tmp_path):
    code = 'def f(t):\n    return t == "anthropic"\n'
    root = _tree(tmp_path, {"__init__.py": "", "providers/__init__.py": "", "providers/x.py": code})
    assert provider_literals(root) == []


def growing_tables(root: Path) -> list[str]:
    """Module-level dicts that code adds to (``T[k] = v``, ``T.setdefault``,
    ``T.update``): process-wide tables, each of which must be a ``Bounded``."""
    found = []
    for name, path in modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        tables = set()
        for node in tree.body:
            target, value = None, None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            is_dict = isinstance(value, ast.Dict) or (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "dict"
            )
            if isinstance(target, ast.Name) and is_dict:
                tables.add(target.id)
        for node in ast.walk(tree):
            grown = None
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                grown = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("setdefault", "update", "__setitem__")
            ):
                grown = node.func.value
            if isinstance(grown, ast.Name) and grown.id in tables:
                found.append(f"{name}.{grown.id}")
    return sorted(set(found))


def test_every_process_wide_table_has_a_bound():
    found = growing_tables(CORE)
    assert not found, "process-wide tables without a bound (make each a Bounded): " + ", ".join(
        found
    )


def test_an_unbounded_process_wide_table_is_found(tmp_path):
    code = "_SEEN: dict[str, str] = {}\n\ndef f(k):\n    _SEEN[k] = k\n"
    root = _tree(tmp_path, {"__init__.py": "", "context/__init__.py": "", "context/m.py": code})
    assert growing_tables(root) == ["nodecode.context.m._SEEN"]


@pytest.mark.parametrize(
    "source",
    [
        "from nodecode.verbs.table import VERBS\n",
        "import nodecode.workspace\n",
        "from nodecode import app\n",
        "from .. import config\n",
        "def f():\n    from nodecode.verbs import files\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nodecode.workspace import W\n",
    ],
)
def test_an_import_from_cells_upwards_is_found_wherever_it_sits(tmp_path, source):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "app.py": "",
            "config.py": "",
            "workspace.py": "",
            "verbs/__init__.py": "",
            "verbs/files.py": "",
            "verbs/table.py": "",
            "cells/__init__.py": "",
            "cells/env.py": "from nodecode.errors import CellError\nfrom . import forms\n",
            "cells/forms.py": "",
            "cells/evaluate.py": source,
        },
    )
    (found,) = below(imports(root), "nodecode.cells", CELLS_MAY_IMPORT)
    assert found.startswith("nodecode.cells.evaluate imports nodecode.")


def cited_outside(root: Path) -> list[str]:
    """Lines of the repository's text that send a reader to a document it lacks
    (the original specification, cited by its section)."""
    found = []
    paths = [p for top in TOPS for p in sorted((root / top).rglob("*")) if p.suffix in TEXT]
    for path in [*paths, *(root / name for name in ("README.md", "Makefile"))]:
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if CITE in line:
                found.append(f"{path.relative_to(root)}:{n}")
    return found


TEXT = {".py", ".lua", ".md", ".txt", ".vim"}
TOPS = ("python", "tests", "bench", "lua", "plugin", "doc", "scripts")
REPO = CORE.parents[1]
CITE = "".join(("SP", "EC"))  # its name, spelt apart: this file is scanned too


def test_the_repository_explains_itself():
    # doc/design.md and bench/README.md are the reference: no file cites a
    # specification that is not in the repository.
    assert cited_outside(REPO) == []


def test_a_citation_of_the_spec_is_found(tmp_path):
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "m.py").write_text(f'"""Recall ({CITE} §5)."""\n')
    assert cited_outside(tmp_path) == ["python/m.py:1"]
