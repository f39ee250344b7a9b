"""What the review page shows about a reflection: its two voices with every cited
``[X.Y]`` marked and expanded to the charter section's text.

Why: a reviewer scores charter_grounding by reading the cited section next to the
sentence that cites it; looking numbers up in another window is where mistakes
come from. Unknown sections and malformed citations are shown as such.
"""
from __future__ import annotations

import re

from markupsafe import Markup, escape

from decision_pipeline.charter.charter import CITATION_RE, Charter, citations, malformed_citations
from decision_pipeline.charter.checks import split_voices
from decision_pipeline.charter.rubric import VOICE_DOCS, VOICE_LABELS, VOICES


def _mark(text: str, charter: Charter, prefix: str) -> Markup:
    """`text` escaped, each [X.Y] wrapped in a link to its expansion below the voice."""
    def sub(m: re.Match) -> str:
        sid = f"{int(m.group(1))}.{int(m.group(2))}"
        cls = "cite" if charter.has(sid) else "cite unknown"
        return f'<a class="{cls}" href="#{prefix}-{sid}">{m.group(0)}</a>'
    return Markup(CITATION_RE.sub(sub, str(escape(text))))


def voice_views(reflection: str, charter: Charter) -> list[dict]:
    """One dict per voice (in VOICES order): key, label, doc, html (citations marked),
    missing (no text for this voice), cited [{id, title, part, text, known}] in
    first-cited order, malformed [citation-like spans not in [X.Y] form]."""
    voices = split_voices(reflection)
    out = []
    for v in VOICES:
        text = voices.get(v, "")
        cited, seen = [], set()
        for sid in citations(text):
            if sid in seen:
                continue
            seen.add(sid)
            sec = charter.sections.get(sid)
            cited.append({"id": sid, "known": sec is not None, "title": sec.title if sec else "",
                          "part": sec.part if sec else "", "text": sec.text if sec else ""})
        out.append({"key": v, "label": VOICE_LABELS[v], "doc": VOICE_DOCS[v], "missing": not text.strip(),
                    "html": _mark(text, charter, v), "cited": cited, "malformed": malformed_citations(text)})
    return out
