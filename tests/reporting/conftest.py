"""Fixtures for the report tests: a copy of the fixture metrics tree, and poppler for rendering pages."""
from __future__ import annotations

import os
import shutil
import subprocess
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


def _install_poppler() -> str | None:
    """Install Debian's poppler-utils when pdftoppm is missing; the reason it could not, else None."""
    if shutil.which("pdftoppm"):
        return None
    if not shutil.which("apt-get"):
        return "pdftoppm missing and no apt-get to install poppler-utils"
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if sudo is None:
        return "pdftoppm missing; not root and no sudo to install poppler-utils"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "install", "-y", "-q", "poppler-utils"],
                ["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "poppler-utils"]):
        try:
            subprocess.run(sudo + cmd, env=env, capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"installing poppler-utils failed: {exc}"
        if shutil.which("pdftoppm"):
            return None
    return "apt-get install poppler-utils did not provide pdftoppm (no package source reachable?)"


@pytest.fixture(scope="session")
def pdftoppm() -> str:
    reason = _install_poppler()
    if reason:
        pytest.skip(reason)
    return shutil.which("pdftoppm")
