"""Which project files a stage's code depends on, read from its imports.

Why: DVC does not read imports. A stage whose `deps` leave out a module it
imports keeps a stale result after that module changes (`dvc repro` says "up to
date"). This module computes, for an entry module, the transitive closure of
project modules it imports (every `import` statement anywhere in the file,
function-level ones included), so a test can compare it with `dvc.yaml` and a
person adding a stage can print the deps to list:

    python -m decision_pipeline codedeps            # every stage: missing deps
    python -m decision_pipeline codedeps --suggest  # every stage: a deps list to paste

Rules: a package's `__init__.py` counts only when it holds code beyond a
docstring (an empty package file cannot change a result); a dep covers a file
when it names the file or any directory above it.
"""
from __future__ import annotations

import argparse
import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PROJECT_PACKAGES = ("stages", "decision_pipeline")
ENTRY_PACKAGE = "stages"
_CMD_MODULE = re.compile(r"python\s+-m\s+(stages\.[A-Za-z_][\w.]*)")


def module_file(root: Path, module: str) -> Path | None:
    """The file that defines `module` under `root` (a module file or a package's __init__)."""
    base = root.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _is_project(module: str) -> bool:
    return module.split(".")[0] in PROJECT_PACKAGES


def _has_code(path: Path) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return bool(body)


def _package_of(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1])
    return ".".join(parts[:-1])


@lru_cache(maxsize=None)
def direct_imports(root: Path, path: Path) -> tuple[str, ...]:
    """Project modules imported anywhere in `path` (absolute names; submodules resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    package = _package_of(root, path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if _is_project(a.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if not _is_project(module):
                continue
            found.append(module)
            for alias in node.names:   # `from pkg import submodule`
                if module_file(root, f"{module}.{alias.name}") is not None:
                    found.append(f"{module}.{alias.name}")
    return tuple(dict.fromkeys(found))


def import_closure(root: Path, module: str) -> set[Path]:
    """Every project file `module` needs, itself included, relative to `root`."""
    root = root.resolve()
    seen: set[str] = set()
    files: set[Path] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        for i in range(1, len(parts)):          # importing a.b.c runs a/__init__ and a/b/__init__
            todo.append(".".join(parts[:i]))
        path = module_file(root, name)
        if path is None:
            continue
        if path.name != "__init__.py" or _has_code(path):
            files.add(path.relative_to(root))
        todo.extend(direct_imports(root, path))
    return files


@dataclass(frozen=True)
class StageCode:
    """One resolved dvc.yaml stage: its name, entry module and declared deps."""
    name: str
    module: str
    deps: tuple[str, ...]


def pipeline_stages(root: Path) -> list[StageCode]:
    """Resolved stages of `root`/dvc.yaml (foreach expanded by DVC itself)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        out = []
        for stage in repo.index.stages:
            match = _CMD_MODULE.search(stage.cmd if isinstance(stage.cmd, str) else " ".join(stage.cmd))
            if match is None:
                continue
            deps = tuple(Path(d.def_path).as_posix().rstrip("/") for d in stage.deps)
            out.append(StageCode(stage.name, match.group(1), deps))
    return out


def covered(path: Path, deps: tuple[str, ...]) -> bool:
    """True when a dep names `path` or a directory above it."""
    text = path.as_posix()
    return any(text == d or text.startswith(d + "/") for d in deps)


def missing_deps(root: Path, stage: StageCode) -> list[Path]:
    """Files the stage's code imports that its deps do not cover, sorted."""
    return sorted(p for p in import_closure(root, stage.module) if not covered(p, stage.deps))


def suggest(root: Path, module: str) -> list[str]:
    """A compact deps list: a directory where the closure holds every file under it."""
    closure = import_closure(root, module)
    out: set[str] = set()
    for path in closure:
        chosen = path
        for parent in path.parents:
            if parent == Path(".") or parent.name in PROJECT_PACKAGES:
                break
            every = {p.relative_to(root.resolve()) for p in (root.resolve() / parent).rglob("*.py")}
            every = {p for p in every if p.name != "__init__.py" or _has_code(root / p)}
            if every <= closure:
                chosen = parent
        out.add(chosen.as_posix())
    return sorted(d for d in out if not any(d.startswith(o + "/") for o in out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="repository root holding dvc.yaml")
    parser.add_argument("--suggest", action="store_true", help="print a deps list per stage")
    args = parser.parse_args(argv)
    root = Path(args.root)
    bad = 0
    for stage in pipeline_stages(root):
        if args.suggest:
            print(f"{stage.name}: [{', '.join(suggest(root, stage.module))}]")
            continue
        for path in missing_deps(root, stage):
            bad += 1
            print(f"{stage.name}: dvc.yaml deps miss {path} (imported by {stage.module})")
    return 1 if bad else 0

