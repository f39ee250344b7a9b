"""The suite's scheduling hint names files that exist (a renamed file would silently run last again)."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_the_longest_first_files_exist():
    missing = [name for name in LONGEST_FIRST if not (ROOT / name).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_FIRST names {missing}; update it to the files' new paths"
