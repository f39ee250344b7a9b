"""Fixtures for the report tests: a copy of the fixture metrics tree (pages render with pypdfium2, a locked wheel)."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from decision_pipeline.common.dvcfiles import pipeline_files

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_root(tmp_path) -> Path:
    """A repository-like root holding the fixture metrics/ and plots/, params.yaml and the real dvc.yaml."""
    root = tmp_path / "run"
    shutil.copytree(FIXTURES, root)
    copy_pipeline_files(root)
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")  # the report checks every section
    return root


def copy_pipeline_files(root: Path) -> None:
    """The real dvc.yaml and its parts (pipelines/<part>/dvc.yaml): Appendix B lists their stages."""
    for path in pipeline_files(ROOT):
        (root / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, root / path.relative_to(ROOT))


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> tuple[Path, dict, float]:
    """One build of the unchanged fixture tree (as run_root holds it): (root, counts, seconds the build took).
    The tests that only read a complete default report share it rather than each rebuilding the same inputs
    into the same outputs; a test that changes anything copies the tree or uses run_root."""
    from decision_pipeline.reporting.report.build import build_report
    root = tmp_path_factory.mktemp("built") / "run"
    shutil.copytree(FIXTURES, root)
    copy_pipeline_files(root)
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")
    started = time.time()
    counts = build_report(root, "report/report.pdf", "metrics/summary.json", "plots/report", root / "params.yaml")
    return root, counts, time.time() - started
