"""The library's import graph: every package imports only packages on a lower floor, and no module
imports itself back through others (a circle), function-level imports included.

Why: an upward import (lm reaching into decision) or a circle hidden by a function-level import
means a change in one room silently moves another; the floors say who may lean on whom.
"""
from __future__ import annotations

from pathlib import Path

from decision_pipeline.common.codedeps import direct_imports

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "decision_pipeline"

# package -> floor; a package may import packages on strictly lower floors (and itself)
FLOORS = {
    "common": 0,
    "questions": 1,
    "lm": 2,
    "curation": 3, "decision": 3,
    "bench": 4, "charter": 4,
    "reporting": 5, "review_ui": 5,
    "preflight": 6,
}
TOP_LEVEL = {"config", "profiles"}  # index modules that may import every package (never imported by one)


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(LIB.rglob("*.py")):
        mod = _module(path)
        graph[mod] = {m for m in direct_imports(ROOT, path) if m.startswith("decision_pipeline.")}
    return graph


def test_every_package_has_a_floor():
    packages = {p.name for p in LIB.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages <= set(FLOORS), f"give these packages a floor in FLOORS: {sorted(packages - set(FLOORS))}"


def test_no_package_imports_upward():
    upward = []
    for mod, targets in _graph().items():
        src = _package(mod)
        if src in TOP_LEVEL or src not in FLOORS:
            continue
        for target in targets:
            dst = _package(target)
            if dst in TOP_LEVEL and target != "decision_pipeline":
                upward.append(f"{mod} -> {target} (the params index sits above every package)")
            elif dst in FLOORS and dst != src and FLOORS[dst] >= FLOORS[src]:
                upward.append(f"{mod} -> {target} ({src} is on floor {FLOORS[src]}, {dst} on {FLOORS[dst]})")
    assert not upward, "imports that do not go down a floor:\n" + "\n".join(sorted(upward))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative order by name)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
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


def test_no_import_circle():
    graph = {m: {t for t in ts if t != m and not m.startswith(t + ".")} for m, ts in _graph().items()}
    circles = _cycles(graph)
    assert not circles, "import circles (function-level imports count):\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_catches_a_planted_circle():
    planted = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert _cycles(planted) == [["a.x", "a.y", "a.z"]]
