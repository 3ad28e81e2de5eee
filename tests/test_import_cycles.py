"""No import circle inside a package (DESIGN.md: the generic kit sits below the parts that
use it; no module imports a registry that imports it back).

Every import counts: module level, inside functions (lazy) and under ``TYPE_CHECKING``.
The graph is read from the source with ``ast`` (nothing is imported), so a circle that
only a lazy import closes is found too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "tgen_tui"
CHECKED = ("engine", "methodology", "session")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((PKG / package).rglob("*.py"))}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` (module ``name``) imports, anywhere in it."""
    is_pkg = path.name == "__init__.py"
    base = name if is_pkg else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                mod = ".".join([*anchor, mod] if mod else anchor)
            # ``from pkg import mod`` imports the module pkg.mod when there is one
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def import_graph(package: str) -> dict[str, set[str]]:
    mods = _modules(package)
    known = set(mods)
    return {name: _imports(path, name, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_lazy_circle(tmp_path):
    # the finder itself: a circle closed by a lazy and a TYPE_CHECKING import is found
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", CHECKED)
def test_no_import_circle(package):
    if not (PKG / package).is_dir():
        pytest.skip(f"tgen_tui/{package} does not exist")
    found = cycles(import_graph(package))
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)
