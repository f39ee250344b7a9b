"""The library's import graph: every package imports only packages on a lower floor, and no module
imports itself back through others (a circle), function-level imports included. Inside `decision`,
the same rule holds between its rooms (the shared top-level modules and the sub-packages by job),
and no module hands on a name it only imported (a re-export).

Why: an upward import (lm reaching into decision) or a circle hidden by a function-level import
means a change in one room silently moves another; the floors say who may lean on whom. A
re-export gives one class two addresses, so an importer reads the wrong module for its definition.
"""
from __future__ import annotations

import ast
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

# inside decision: room (a top-level module or a sub-package) -> floor; a room imports only rooms on strictly
# lower floors (and itself). The top-level modules are the documented handful every job shares.
DECISION = LIB / "decision"
DECISION_FLOORS = {
    "prompts": 0, "parsing": 0,
    "base": 1, "generate": 1, "evaluate": 1,
    "sft": 2, "rl": 2,
}
MAX_DECISION_TOP_MODULES = 4


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


def _decision_room(module: str) -> str | None:
    """`decision_pipeline.decision.sft.trainer` -> `sft`; None outside decision or for the package itself."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["decision_pipeline", "decision"] else None


def _decision_upward(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Imports between decision's rooms that do not go down a floor (a room without a floor counts as one)."""
    upward = []
    for mod, targets in graph.items():
        src = _decision_room(mod)
        if src is None:
            continue
        for target in targets:
            dst = _decision_room(target)
            if dst is None or dst == src:
                continue
            if src not in floors or dst not in floors:
                missing = src if src not in floors else dst
                upward.append(f"{mod} -> {target} (give {missing} a floor in DECISION_FLOORS)")
            elif floors[dst] >= floors[src]:
                upward.append(f"{mod} -> {target} ({src} is on decision floor {floors[src]}, {dst} on {floors[dst]})")
    return sorted(upward)


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


def test_every_decision_room_has_a_floor_and_few_modules_stay_outside_a_sub_package():
    packages = {p.name for p in DECISION.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    modules = {p.stem for p in DECISION.glob("*.py") if p.stem != "__init__"}
    assert packages | modules == set(DECISION_FLOORS), \
        f"DECISION_FLOORS names {sorted(DECISION_FLOORS)}; decision/ holds {sorted(packages | modules)}"
    assert len(modules) <= MAX_DECISION_TOP_MODULES, f"modules outside a sub-package: {sorted(modules)}"
    doc = ast.get_docstring(ast.parse((DECISION / "__init__.py").read_text()))
    undocumented = sorted(m for m in modules if f"`{m}.py`" not in doc)
    assert not undocumented, f"decision/__init__.py does not say why these stay outside a sub-package: {undocumented}"


def test_every_decision_package_says_what_it_holds_and_may_import():
    for init in sorted(DECISION.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 20 and "import" in doc, f"{init.relative_to(ROOT)}: docstring too thin"
        body = ast.parse(init.read_text()).body[1:]
        assert not body, f"{init.relative_to(ROOT)} holds code (a package file here is its docstring only)"


def test_no_decision_room_imports_upward():
    upward = _decision_upward(_graph(), DECISION_FLOORS)
    assert not upward, "imports inside decision that do not go down a floor:\n" + "\n".join(upward)


def test_the_decision_floor_check_catches_planted_upward_imports():
    d = "decision_pipeline.decision"
    planted = {
        f"{d}.evaluate.metrics": {f"{d}.sft.trainer", f"{d}.prompts", "decision_pipeline.common.stats"},  # up
        f"{d}.generate.run": {f"{d}.evaluate.config", f"{d}.generate.sharding"},   # sideways: same floor
        f"{d}.sft.run": {f"{d}.evaluate.answering", f"{d}.sft.data"},               # down and within: fine
        f"{d}.parsing": {f"{d}.kitchen.sink"},                                      # a room with no floor
    }
    found = _decision_upward(planted, DECISION_FLOORS)
    assert [line.split(" (")[0] for line in found] == [
        f"{d}.evaluate.metrics -> {d}.sft.trainer", f"{d}.generate.run -> {d}.evaluate.config",
        f"{d}.parsing -> {d}.kitchen.sink"]


def _defined_names(path: Path) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments), not those it imports."""
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


def _re_exports(paths: list[Path]) -> list[str]:
    """`from decision_pipeline.decision.<module> import X` lines in `paths` whose module does not define X
    (and X is no submodule): the module only passes on a name it imported."""
    offenders = []
    for path in paths:
        where = path.relative_to(ROOT) if ROOT in path.parents else path.name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and not node.level and node.module
                    and node.module.startswith("decision_pipeline.decision")):
                continue
            base = ROOT.joinpath(*node.module.split("."))
            source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            defined = _defined_names(source)
            for alias in node.names:
                submodule = base / alias.name
                if alias.name not in defined and not (submodule.with_suffix(".py").is_file() or submodule.is_dir()):
                    offenders.append(f"{where}:{node.lineno}: {alias.name} from {node.module}")
    return offenders


def test_no_decision_module_re_exports_a_name():
    """Every import from a decision module anywhere in the repository names a module that defines the
    name (or a submodule): a params class has one address, its sub-package's config.py."""
    paths = sorted(p for d in ("decision_pipeline", "stages", "tests", "scripts", "perf")
                   for p in (ROOT / d).rglob("*.py"))
    offenders = _re_exports(paths)
    assert not offenders, "names imported from a module that does not define them:\n" + "\n".join(offenders)


def test_the_re_export_check_catches_a_planted_one(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from decision_pipeline.decision.sft.config import SFTParams\n"
                       "from decision_pipeline.decision.sft import trainer\n"
                       "from decision_pipeline.decision.sft.trainer import SFTParams, train_joint\n")
    assert _re_exports([planted]) == ["planted.py:3: SFTParams from decision_pipeline.decision.sft.trainer"]
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
