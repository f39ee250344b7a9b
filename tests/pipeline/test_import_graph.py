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


# ---------------------------------------------------------------- reporting's sub-packages (issue 55)
# Inside reporting, floors again: the top modules (style, layout, stage_figures: what more than one job
# or a stage uses) below report/ (the PDF), below review/ and docs/ (which read the report's registry and
# never each other). A module names the class or function it imports from the module that defines it.
import ast  # noqa: E402  (this block's own imports, kept inside it)

from decision_pipeline.common.codedeps import module_file  # noqa: E402

REPORTING = "decision_pipeline.reporting"
REPORTING_FLOORS = {"": 0, "report": 1, "review": 2, "docs": 2}   # "": the top modules
REPORTING_TOP = {"style", "layout", "stage_figures"}             # the documented handful (<= 4)


def _reporting_room(module: str) -> str | None:
    """The sub-package of reporting a module is in ('' for the top modules), None outside reporting."""
    if module != REPORTING and not module.startswith(REPORTING + "."):
        return None
    sub = module[len(REPORTING) + 1:].split(".")[0]
    return sub if sub in REPORTING_FLOORS else ""


def _reporting_upward(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for mod, targets in graph.items():
        src = _reporting_room(mod)
        if src is None:
            continue
        for target in targets:
            dst = _reporting_room(target)
            if dst is not None and dst != src and REPORTING_FLOORS[dst] >= REPORTING_FLOORS[src]:
                found.append(f"{mod} -> {target} (reporting/{src or '<top>'} is on floor {REPORTING_FLOORS[src]}, "
                             f"reporting/{dst or '<top>'} on {REPORTING_FLOORS[dst]})")
    return sorted(found)


def test_reporting_sub_packages_import_only_lower_floors():
    upward = _reporting_upward(_graph())
    assert not upward, "imports inside reporting that do not go down a floor:\n" + "\n".join(upward)


def test_the_reporting_floor_check_catches_a_planted_upward_import():
    r = REPORTING
    planted = {f"{r}.style": {f"{r}.report.figures"},                  # top -> report: up
               f"{r}.report.build": {f"{r}.review.diff", f"{r}.style"},  # report -> review: up; -> top: down
               f"{r}.review.diff": {f"{r}.docs.readme", f"{r}.report.sections", f"{r}.review.rebase"},  # sideways
               f"{r}.docs.dag": {f"{r}.layout", "decision_pipeline.common.io"}}                       # all down
    assert [line.split(" (")[0] for line in _reporting_upward(planted)] == [
        f"{r}.report.build -> {r}.review.diff", f"{r}.review.diff -> {r}.docs.readme", f"{r}.style -> {r}.report.figures"]


def test_reporting_top_modules_are_the_documented_handful():
    pkg = LIB / "reporting"
    top = {p.stem for p in pkg.glob("*.py") if p.name != "__init__.py"}
    subs = {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    assert top == REPORTING_TOP and len(top) <= 4, f"modules outside a sub-package of reporting: {sorted(top)}"
    assert subs == set(REPORTING_FLOORS) - {""}, f"give these sub-packages a floor: {sorted(subs)}"
    doc = (pkg / "__init__.py").read_text(encoding="utf-8")
    assert all(f"{name}.py" in doc for name in top) and all(f"{sub}/" in doc for sub in subs)


def _defined_names(path: Path) -> set[str]:
    """Names a module defines itself (functions, classes, assignments), not the ones it imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _borrowed_imports(root: Path, files: list[Path]) -> list[str]:
    """`from <reporting module> import X` where that module only imports X itself (a re-export)."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(REPORTING)):
                continue
            source = module_file(root, node.module)
            if source is None or source.name == "__init__.py":
                continue
            own = _defined_names(source)
            found += [f"{path.relative_to(root)}: {a.name} from {node.module}" for a in node.names
                      if a.name not in own and module_file(root, f"{node.module}.{a.name}") is None]
    return found


def test_reporting_names_are_imported_from_the_module_that_defines_them():
    files = [p for d in ("decision_pipeline", "stages", "scripts", "tests") for p in sorted((ROOT / d).rglob("*.py"))]
    borrowed = _borrowed_imports(ROOT, files)
    assert not borrowed, "import these from the module that defines them:\n" + "\n".join(borrowed)


def test_the_re_export_check_catches_a_planted_one(tmp_path):
    for rel, text in {"decision_pipeline/reporting/a.py": "class Store:\n    pass\n",
                      "decision_pipeline/reporting/b.py": "from decision_pipeline.reporting.a import Store\n",
                      "user.py": "from decision_pipeline.reporting.b import Store\nfrom decision_pipeline.reporting.a import Store\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert _borrowed_imports(tmp_path, [tmp_path / "user.py"]) == ["user.py: Store from decision_pipeline.reporting.b"]


# ------------------------------------------------------------ end of reporting's sub-packages (issue 55)
