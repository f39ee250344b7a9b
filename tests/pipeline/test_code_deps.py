"""dvc.yaml deps cover the code each stage runs, and entry points stay apart from the library.

Why: DVC does not read imports. A stage that imports a module its deps leave out
keeps a stale result after that module changes; an entry module importing
another entry module hides that dependency twice over.
"""
import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from decision_pipeline.common.codedeps import import_closure, missing_deps, pipeline_stages

ROOT = Path(__file__).resolve().parents[2]
STAGES = pipeline_stages(ROOT)


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_every_stage_has_an_entry_module():
    assert STAGES, "no stage with a `python -m stages.<name>` command found in dvc.yaml"
    for stage in STAGES:
        assert (ROOT / Path(*stage.module.split("."))).with_suffix(".py").is_file(), stage.name


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_stage_deps_cover_its_import_closure(stage):
    missing = missing_deps(ROOT, stage)
    assert not missing, (f"stage {stage.name}: dvc.yaml deps miss {', '.join(map(str, missing))} "
                         f"(imported by {stage.module}); add them or a directory above them")


def test_entry_modules_import_no_other_entry_module():
    for path in sorted((ROOT / "stages").glob("*.py")):
        crossing = sorted(n for n in _imports(path) if n == "stages" or n.startswith("stages."))
        assert not crossing, f"{path.relative_to(ROOT)} imports entry module(s) {crossing}; move the shared code into decision_pipeline/"


def test_library_never_imports_entry_modules():
    for path in sorted((ROOT / "decision_pipeline").rglob("*.py")):
        crossing = sorted(n for n in _imports(path) if n == "stages" or n.startswith("stages."))
        assert not crossing, f"{path.relative_to(ROOT)} imports entry module(s) {crossing}"


def test_closure_follows_imports_transitively(tmp_path):
    """A dep two imports away is found, function-level imports count, empty __init__ files do not."""
    for d in ("stages", "decision_pipeline", "decision_pipeline/sub"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "__init__.py").write_text('"""doc only"""\n')
    (tmp_path / "stages/one.py").write_text("from decision_pipeline.sub import a\n")
    (tmp_path / "decision_pipeline/sub/a.py").write_text("def f():\n    from decision_pipeline import b\n")
    (tmp_path / "decision_pipeline/b.py").write_text("from .sub.c import x\n")
    (tmp_path / "decision_pipeline/sub/c.py").write_text("x = 1\n")
    closure = {p.as_posix() for p in import_closure(tmp_path, "stages.one")}
    assert closure == {"stages/one.py", "decision_pipeline/sub/a.py", "decision_pipeline/b.py",
                       "decision_pipeline/sub/c.py"}


@pytest.mark.slow
@pytest.mark.parametrize("dvcfile, victim, stage", [
    ("dvc.yaml", "decision_pipeline/decision/sft/chains.py", "select_chains"),
    ("pipelines/curation/dvc.yaml", "decision_pipeline/curation/compare.py", "pretrain_compare"),
    ("pipelines/charter/dvc.yaml", "decision_pipeline/charter/seed.py", "seed_sample"),
])
def test_removing_one_dep_line_fails(tmp_path, dvcfile, victim, stage):
    """The check bites in every pipeline file: drop a module from a stage's deps in a copy of the repo
    (the root dvc.yaml or a part in pipelines/) and it is reported."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "data", "models", "__pycache__"))
    (copy / ".dvc" / "tmp").mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    assert not any(missing_deps(copy, s) for s in pipeline_stages(copy) if s.name == stage)
    text = (copy / dvcfile).read_text()
    assert victim in text
    (copy / dvcfile).write_text(text.replace(f", {victim}", "").replace(f"{victim}, ", ""))
    broken = {s.name: missing_deps(copy, s) for s in pipeline_stages(copy)}
    assert [Path(victim)] == broken[stage]


@pytest.mark.slow
def test_an_entry_module_importing_another_fails(tmp_path):
    """The boundary check bites: a stage->stage import planted in a copy is reported."""
    copy = tmp_path / "stages"
    shutil.copytree(ROOT / "stages", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "choose_lr.py").write_text((copy / "choose_lr.py").read_text() + "\nfrom stages.sft import main as _m\n")
    crossing = {p.name for p in copy.glob("*.py") if any(n.startswith("stages.") for n in _imports(p))}
    assert crossing == {"choose_lr.py"}
