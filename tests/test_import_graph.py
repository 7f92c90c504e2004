"""The module graph of tilelint's own code: no import cycles among the modules of
analysis/ and server/, and no module reaching into another module's private names.

Every ``import`` counts, the ones inside functions included: a cycle hidden by a
function-level import is still a cycle (the two modules cannot be understood, tested
or split apart one without the other).  Importing ``a.b`` runs ``a/__init__`` too,
but that implicit edge is not counted: only the module an import statement names is.

The graph is read with ``ast`` from the source files; nothing is imported.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
# Source folder -> dotted package name (pyproject.toml's package-dir).
PACKAGES = {"analysis": "tilelint.analysis", "server": "tilelint.server"}

# Import cycles that exist today and are not broken yet, each as the set of modules
# of one strongly connected component (short names, "tilelint." left off).  The
# test fails when a new one appears AND when one of these disappears or changes, so
# the list stays exactly true: remove an entry when you break its cycle.
KNOWN_CYCLES: Set[FrozenSet[str]] = set()

# ``from X import _name`` (or ``X._name``) across modules, as (importer, target, name),
# that exist today and are not made public yet.  Same rule: exactly true.
KNOWN_PRIVATE: Set[Tuple[str, str, str]] = set()


def _modules() -> Dict[str, Path]:
    """Dotted module name -> file, for every module of analysis/ and server/."""
    out: Dict[str, Path] = {}
    for folder, dotted in PACKAGES.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([dotted, *parts])] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _resolve_relative(module: str, level: int, target: Optional[str]) -> str:
    """The absolute name of ``from <dots><target> import ...`` written in ``module``."""
    package = module if _is_package(module) else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{target}" if target else package


def _ours(name: str) -> Optional[str]:
    """The project module ``name`` refers to (itself, or the closest enclosing one
    for ``pkg.mod.attr``), or None when it is not one of ours."""
    while name:
        if name in MODULES:
            return name
        if "." not in name:
            return None
        name = name.rpartition(".")[0]
    return None


class _Imports(ast.NodeVisitor):
    """Edges (imported module) and private names of one module."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.edges: Set[str] = set()
        self.private: Set[Tuple[str, str]] = set()  # (target module, name)
        self.aliases: Dict[str, str] = {}  # local name bound to a project module

    def _edge(self, target: Optional[str]) -> None:
        if target is not None and target != self.module:
            self.edges.add(target)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            target = _ours(alias.name)
            self._edge(target)
            if target is not None and alias.asname:
                self.aliases[alias.asname] = target

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = _resolve_relative(self.module, node.level, node.module)
        else:
            base = node.module or ""
        base_mod = _ours(base)
        if base_mod is None:
            return
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in MODULES:  # ``from pkg import module``
                self._edge(sub)
                self.aliases[alias.asname or alias.name] = sub
                continue
            self._edge(base_mod)
            if _private(alias.name) and base_mod != self.module:
                self.private.add((base_mod, alias.name))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # ``mod._name`` where ``mod`` is a project module imported under that name.
        if isinstance(node.value, ast.Name) and _private(node.attr):
            target = self.aliases.get(node.value.id)
            if target is not None and target != self.module:
                self.private.add((target, node.attr))
        self.generic_visit(node)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _scan() -> Tuple[Dict[str, Set[str]], Set[Tuple[str, str, str]]]:
    graph: Dict[str, Set[str]] = {}
    private: Set[Tuple[str, str, str]] = set()
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        v = _Imports(module)
        # Two passes: the aliases first (an import may come after a use in the
        # source order of functions), then the attribute uses.
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                v.visit_Import(node)
            elif isinstance(node, ast.ImportFrom):
                v.visit_ImportFrom(node)
        v.visit(tree)
        graph[module] = v.edges
        private |= {(_short(module), _short(t), n) for t, n in v.private}
    return graph, private


def _short(module: str) -> str:
    return module.removeprefix("tilelint.")


def _components(graph: Dict[str, Set[str]]) -> List[Set[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    out: List[Set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: List[Tuple[str, Iterator[str]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(sorted(graph[root]))))
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: Set[str] = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.add(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def _a_cycle(graph: Dict[str, Set[str]], comp: Set[str]) -> List[str]:
    """One concrete cycle through a component, for the failure message."""
    start = min(comp)
    # Breadth-first from start back to start, inside the component.
    prev: Dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & comp):
                if child == start:
                    path = [node]  # node, its predecessor, ..., start
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if child not in prev:
                    prev[child] = node
                    nxt.append(child)
        frontier = nxt
    return sorted(comp)


GRAPH, PRIVATE = _scan()


def test_the_scan_sees_the_modules_and_their_imports() -> None:
    """The scan itself works: known edges are found (a test that can fail)."""
    assert "tilelint.analysis.pipeline" in MODULES
    assert "tilelint.server.lsp.app" in MODULES
    # pipeline imports the frontend (a module-level relative import) and packing
    # (inside a function) ...
    assert "tilelint.analysis.frontend" in GRAPH["tilelint.analysis.pipeline"]
    assert "tilelint.analysis.packing" in GRAPH["tilelint.analysis.pipeline"]
    # ... and the CLI imports the analysis package through absolute or relative names.
    assert any(t.startswith("tilelint.analysis") for t in GRAPH["tilelint.server.cli"])
    # Subpackages are scanned too: a relative import climbs out of one
    # (``from ..model import``) or stays inside it (``from .evaluate import``).
    assert "tilelint.analysis.model" in GRAPH["tilelint.analysis.values.evaluate"]
    assert "tilelint.analysis.values.evaluate" in GRAPH["tilelint.analysis.values.interpret"]
    assert "tilelint.analysis.frontend.statements" in GRAPH["tilelint.analysis.frontend.kernels"]


def test_no_new_import_cycles() -> None:
    found = {frozenset(_short(m) for m in comp) for comp in _components(GRAPH)}
    new = found - KNOWN_CYCLES
    gone = KNOWN_CYCLES - found
    msgs = []
    for comp in sorted(new, key=sorted):
        full = {f"tilelint.{m}" for m in comp}
        path = " -> ".join(_short(m) for m in _a_cycle(GRAPH, full))
        msgs.append(f"new import cycle among {sorted(comp)}: {path}")
    for comp in sorted(gone, key=sorted):
        msgs.append(f"known cycle {sorted(comp)} is gone (or changed): "
                    f"update KNOWN_CYCLES in {Path(__file__).name}")
    assert not msgs, "\n".join(msgs)


def test_no_cross_module_private_imports() -> None:
    new = PRIVATE - KNOWN_PRIVATE
    gone = KNOWN_PRIVATE - PRIVATE
    msgs = [f"{imp} uses {tgt}.{name}, a private name of another module"
            for imp, tgt, name in sorted(new)]
    msgs += [f"known private use {imp} -> {tgt}.{name} is gone: update KNOWN_PRIVATE"
             for imp, tgt, name in sorted(gone)]
    assert not msgs, "\n".join(msgs)
