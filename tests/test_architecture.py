"""Layering of the package (issue 10): no import cycles between modules; robots/ depends on nothing
above it."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fg_sysid"
#: What each layer must not import (docs/architecture.md).
FORBIDDEN = {
    "fg_sysid.robots": ("fg_sysid.factors", "fg_sysid.estimation", "fg_sysid.identifiability",
                        "fg_sysid.datasets", "fg_sysid.cli", "fg_sysid.layout", "fg_sysid.parameterizations"),
    "fg_sysid.factors": ("fg_sysid.estimation", "fg_sysid.cli", "fg_sysid.datasets"),
    "fg_sysid.estimation": ("fg_sysid.cli",),
    "fg_sysid.datasets": ("fg_sysid.cli",),
    # the worker process's module: a clean interpreter importing numpy and Pinocchio only
    "fg_sysid.knot_worker": ("fg_sysid.",),
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> fg_sysid modules it imports (module level and inside functions alike)."""
    files = list(PKG.rglob("*.py"))
    modules = {_module(p) for p in files}
    graph = {}
    for p in files:
        m = _module(p)
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    out.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
        graph[m] = {t for t in out if t in modules and t != m}
    return graph


def _cycles(graph):
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v, counter=[0]):  # noqa: B006 (Tarjan's counter)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles(import_graph()) == []


def test_cycle_detector_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers_import_nothing_above_them():
    bad = [(m, t) for m, targets in import_graph().items() for layer, banned in FORBIDDEN.items()
           if m == layer or m.startswith(layer + ".") for t in targets if t.startswith(banned)]
    assert bad == []
