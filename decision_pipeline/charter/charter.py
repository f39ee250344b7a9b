"""The charter: numbered sections a reflection cites as ``[X.Y]``, and citation checks.

Why: reflections are judged partly on citing the right charter section; the charter
file is the single source of section ids, so a citation to a section the charter
lacks (or any other bracket format) is detectable by a pure function.

Charter format (Markdown): ``## N Title`` opens part N, ``### N.M Title`` opens
section ``"N.M"`` whose body runs to the next heading.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.textfile import read_text

CITATION_RE = re.compile(r"\[(\d+)\.(\d+)\]")
# Anything that looks like an attempt to cite in another format: [2], [2.1.3], (2.1),
# [Section 2.1], §2.1, [2,1], 【2.1】 ...
_ANY_CITE_RE = re.compile(
    r"\[[^\[\]\n]{0,20}\d[^\[\]\n]{0,20}\]"      # any bracket containing a digit
    r"|\(\s*(?:§|section\s*)?\d+\.\d+\s*\)"      # (2.1), (§2.1), (section 2.1)
    r"|§\s*\d+(?:\.\d+)*"                         # §2.1
    r"|【[^】]*】", re.IGNORECASE)
_SECTION_RE = re.compile(r"^###\s+(\d+)\.(\d+)\s+(.+?)\s*$")
_PART_RE = re.compile(r"^##\s+(\d+)\s+(.+?)\s*$")


@dataclass(frozen=True)
class Section:
    """One citable charter section."""
    id: str       # "X.Y"
    title: str
    part: str     # title of the enclosing part ("## N Title")
    text: str     # body text, whitespace-normalised


@dataclass(frozen=True)
class Charter:
    """The parsed charter: sections by id (in file order) and the raw text for prompts."""
    path: str
    text: str
    sections: dict[str, Section]

    def has(self, section_id: str) -> bool:
        return section_id in self.sections


def parse_charter(text: str, source: str = "charter") -> Charter:
    """Parse charter Markdown into sections; duplicate or empty sections are errors."""
    sections: dict[str, Section] = {}
    part, current, body = "", None, []

    def close() -> None:
        if current is None:
            return
        sid, title = current
        content = " ".join(" ".join(body).split())
        if not content:
            raise PipelineError(f"{source}: section {sid} '{title}' has no text; write its body or remove it")
        sections[sid] = Section(sid, title, part, content)

    for line in text.splitlines():
        m_sec, m_part = _SECTION_RE.match(line), _PART_RE.match(line)
        if m_sec or m_part or line.startswith("#"):
            close()
            current, body = None, []
            if m_part:
                part = m_part.group(2)
            if m_sec:
                sid = f"{int(m_sec.group(1))}.{int(m_sec.group(2))}"
                if sid in sections:
                    raise PipelineError(f"{source}: section {sid} appears twice; give each section a unique X.Y id")
                current = (sid, m_sec.group(3))
            continue
        if current is not None:
            body.append(line)
    close()
    if not sections:
        raise PipelineError(f"{source}: no '### X.Y Title' sections found; the charter needs numbered sections")
    return Charter(source, text, sections)


def load_charter(path: str | Path) -> Charter:
    """Read and parse the charter file (see module docstring for the format)."""
    p = Path(path)
    if not p.is_file():
        raise PipelineError(f"{p}: charter file not found; fix charter path in params")
    # a BOM or a non-UTF-8 byte: one line naming the file; Windows line endings read as LF (a text-mode read did)
    return parse_charter(read_text(p).replace("\r\n", "\n"), str(p))


def citations(text: str) -> list[str]:
    """Section ids cited as ``[X.Y]`` in `text`, in order (duplicates kept)."""
    return [f"{int(a)}.{int(b)}" for a, b in CITATION_RE.findall(text)]


def malformed_citations(text: str) -> list[str]:
    """Citation-like spans in any format other than ``[X.Y]`` (e.g. ``[2]``, ``(2.1)``, ``§2.1``)."""
    return [m.group(0) for m in _ANY_CITE_RE.finditer(text) if not CITATION_RE.fullmatch(m.group(0))]


def unknown_citations(text: str, charter: Charter) -> list[str]:
    """Well-formed ``[X.Y]`` citations whose section the charter lacks."""
    return [c for c in citations(text) if not charter.has(c)]


def check_citations(text: str, charter: Charter, where: str) -> None:
    """Raise a one-line PipelineError naming `where` if `text` cites badly.

    Used for inputs a person wrote (prompt files, reference generators, imported
    reflections); model outputs are not rejected here but flagged by the hard checks.
    """
    bad = malformed_citations(text)
    if bad:
        raise PipelineError(f"{where}: malformed citation {bad[0]!r}; cite charter sections as [X.Y]")
    missing = unknown_citations(text, charter)
    if missing:
        raise PipelineError(f"{where}: cites [{missing[0]}] but {charter.path} has no section {missing[0]} "
                            f"(sections: {', '.join(charter.sections)})")
