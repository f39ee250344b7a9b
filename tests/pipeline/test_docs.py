"""The README is a front page and every link in it and in docs/ resolves inside the repository.

Why: a user's clone has only the repository: a link to `../shared/...` or a moved section is a
dead end on the first screen they read. The README stays short enough to read (<= 300 lines);
the reference manual lives in docs/.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    for must in ("make run", "make test", "PROFILE=gpu", "dvc exp run -S", "dvc metrics diff", "make review"):
        assert must in text, f"README front page lacks {must!r}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_link_resolves_inside_the_repository(doc):
    bad = []
    for target in LINK.findall(doc.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            if doc.name == "README.md":
                bad.append(f"{target} (the front page links only into the repository)")
            continue
        path = target.split("#", 1)[0]
        if not path:
            continue
        resolved = (doc.parent / path).resolve()
        if ROOT not in resolved.parents and resolved != ROOT:
            bad.append(f"{target} (leaves the repository)")
        elif not resolved.exists():
            bad.append(f"{target} (no such file)")
    assert not bad, f"{doc.relative_to(ROOT)}: " + "; ".join(bad)


def test_no_text_points_outside_the_clone():
    for doc in DOCS:
        assert "../shared/" not in doc.read_text(), f"{doc.name} names ../shared/, which a clone does not have"
