"""Every pointer to a section exists: doc links with anchors, and README/docs section names in messages.

Why: sections move (the README became a front page and its reference sections went
to docs/), and a message that says "see README 'Running on GPUs'" then sends a
person to a heading that is not there. Scanned: markdown links in README.md and
docs/*.md (file and #anchor, GitHub's slug rule), and the Makefile and every
decision_pipeline/stages Python file for `README 'Section'`, `README Section`,
`docs/x.md 'Section'` and `docs/x.md#anchor`.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
QUOTED = r"""['"\u201c]([^'"\u201d]{3,80})['"\u201d]"""
README_REF = re.compile(r"README(?:\.md)?(?:'s)?\s+(?:section\s+)?(?:" + QUOTED + r"|([A-Z][A-Za-z-]+(?: [a-z]+)*))")
DOC_REF = re.compile(r"(docs/[A-Za-z0-9_]+\.md)(?:#([A-Za-z0-9_-]+)|\s+(?:section\s+)?" + QUOTED + r")?")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def sections(path: Path) -> tuple[set[str], list[str]]:
    """(anchors, titles) of a markdown file: headings outside code fences, and bold lead-ins ('**GPU profile.**')."""
    anchors, titles, fenced = set(), [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            title = m.group(1)
            base, n = slug(title), 1
            anchor = base
            while anchor in anchors:                     # GitHub numbers repeated headings
                anchor, n = f"{base}-{n}", n + 1
            anchors.add(anchor)
            titles.append(re.sub(r"[`*]", "", title))
        for bold in re.findall(r"^\*\*([^*]+?)\.?\*\*", line):
            titles.append(bold)
    return anchors, titles


def has_section(path: Path, name: str) -> bool:
    _, titles = sections(path)
    want = name.lower().strip(" .")
    return any(want in t.lower() for t in titles)


def _doc_links() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):            # http:, mailto:
                continue
            out.append((str(doc.relative_to(ROOT)), target))
    return out


@pytest.mark.parametrize("doc,target", _doc_links())
def test_doc_links_resolve_to_a_file_and_an_existing_anchor(doc, target):
    path, _, anchor = target.partition("#")
    file = (ROOT / doc).parent / path if path else ROOT / doc
    assert file.exists(), f"{doc}: link to {target}: {path} does not exist"
    if anchor and file.suffix == ".md":
        anchors, _ = sections(file)
        assert anchor in anchors, f"{doc}: link to {target}: no heading with anchor #{anchor} in {path or doc}"


def _sources() -> list[Path]:
    return [ROOT / "Makefile", *sorted((ROOT / "decision_pipeline").rglob("*.py")), *sorted((ROOT / "stages").glob("*.py"))]


def pointer_problems(path: Path) -> list[str]:
    """Each README/docs section pointer in a file that names nothing existing, as 'file:line: why'."""
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.relative_to(ROOT)}:{i}"
        for m in README_REF.finditer(line):
            name = m.group(1) or m.group(2)
            if not has_section(ROOT / "README.md", name):
                out.append(f"{where}: README has no section '{name}'")
        for m in DOC_REF.finditer(line):
            doc, anchor, name = m.group(1), m.group(2), m.group(3)
            file = ROOT / doc
            if not file.is_file():
                out.append(f"{where}: {doc} does not exist")
            elif anchor and anchor not in sections(file)[0]:
                out.append(f"{where}: {doc} has no anchor #{anchor}")
            elif name and not has_section(file, name):
                out.append(f"{where}: {doc} has no section '{name}'")
    return out


def test_messages_and_makefile_hints_point_at_sections_that_exist():
    problems = [p for src in _sources() for p in pointer_problems(src)]
    assert problems == [], "stale pointers:\n" + "\n".join(problems)


def test_the_scanner_finds_stale_pointers(tmp_path, monkeypatch):
    """Honest check of the scanner itself: a stale README name, a stale anchor and a good pointer."""
    src = ROOT / "decision_pipeline" / "_pointer_probe_test.py"
    lines = ["x = \"see README 'No Such Section'\"",
             "y = 'docs/reliability.md#no-such-anchor'",
             "z = \"docs/reliability.md 'Remote storage'\"",
             "w = 'README Performance'"]
    try:
        src.write_text("\n".join(lines) + "\n")
        found = pointer_problems(src)
    finally:
        src.unlink()
    assert len(found) == 3, found
    assert "'No Such Section'" in found[0] and "#no-such-anchor" in found[1] and "'Performance'" in found[2]
    assert slug("Remote storage (S3-compatible)") == "remote-storage-s3-compatible"
    assert slug("Datatrove, checked 2026-12-03 (datatrove 0.10.1)") == "datatrove-checked-2026-12-03-datatrove-0101"
