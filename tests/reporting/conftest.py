"""Fixtures for the report tests: a copy of the fixture metrics tree (pages render with pypdfium2, a locked wheel)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_root(tmp_path) -> Path:
    """A repository-like root holding the fixture metrics/ and plots/, params.yaml and the real dvc.yaml."""
    root = tmp_path / "run"
    shutil.copytree(FIXTURES, root)
    shutil.copy2(ROOT / "dvc.yaml", root / "dvc.yaml")
    shutil.copy2(ROOT / "params.yaml", root / "params.yaml")  # the report checks every section
    return root
