"""How the rule-based reference writers read a document: their own words to mention and their own
"fitting" charter section, sharing no function with the judge.

Why (issue 50): the references used the judge's own `checks.relevant_sections` (which sections fit a
document) and `checks.doc_keywords` (which document words count as mentioned), so a reference's
"cites the fitting section" and "mentions 3 document words" were true in the judge's eyes by
construction, and the judge's agreement with reviews that read those properties was partly circular.
These rules are a writer's, written from what a reader notices, not from the judge's register
classifier or keyword list; where the two disagree the judge scores a reference lower than its
stated properties, which is the independence the agreement check needs.

- Words to mention (`topic_words`): the document's most repeated words of 5+ letters (ties: first
  seen), skipping function words and forum/Q&A scaffolding (`SKIP`). The judge counts its own 40
  first keywords of 5+ letters; the two lists overlap on most documents, not by construction.
- The fitting section (`fitting_section`), read from surface cues in this order: a harmful document
  (safety score at or above the harm threshold) is answered from the harm-avoidance sections: hostile
  wording (`HOSTILE`) -> Hostile language, otherwise Escalation; a benign one: mostly repeated lines
  or few real words -> Low-value text; two or more lines opened by a user handle -> Escalation (a
  heated exchange is where it goes); reported speech (`REPORTED`) -> Sources; a question in its
  first line -> Practical help; anything else -> Context for facts. `CUES` maps each reading to a
  section id of configs/charter/charter.md; a charter without that id falls back to its first section.
"""
from __future__ import annotations

import re
from collections import Counter

from decision_pipeline.charter.charter import Charter
from decision_pipeline.charter.rubric import VOICE_LABELS, VOICES

WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
SKIP = frozenset("""because before between through should would could which their there these those about
other where while after again against during within without another answer question thread posted
replied people something anything really""".split())
HOSTILE = re.compile(r"\b(idiot|stupid|trash|hate|loser|moron|dumb|pathetic|clown|garbage|toxic|shut up)\w*", re.I)
REPORTED = re.compile(r"\b(said|told|says|according to|announced|reported|claimed)\b", re.I)
HANDLE = re.compile(r"^[\w.-]{3,}: ", re.M)
CUES = {"hostile": "2.1", "heated": "2.3", "junk": "4.1", "exchange": "2.3", "reported": "4.2", "question": "3.1",
        "facts": "3.2"}


def topic_words(text: str, k: int = 3) -> list[str]:
    """The `k` most repeated words of 5+ letters (lower case; ties by first occurrence)."""
    words = [w.lower() for w in WORD.findall(text)]
    counts = Counter(w for w in words if len(w) >= 5 and w not in SKIP)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    return sorted(counts, key=lambda w: (-counts[w], first[w]))[:k]


def reading(text: str, safety_score: int, harm_threshold: int) -> str:
    """Which kind of document the writer takes it for (a key of CUES)."""
    if safety_score >= harm_threshold:
        return "hostile" if HOSTILE.search(text) else "heated"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    words = WORD.findall(text)
    if not words or len(set(lines)) <= len(lines) / 2 or len(words) < len(text.split()) / 2:
        return "junk"
    if len(HANDLE.findall(text)) >= 2:
        return "exchange"
    if REPORTED.search(text):
        return "reported"
    return "question" if "?" in (lines[0] if lines else "") else "facts"


def fitting_section(text: str, safety_score: int, charter: Charter, harm_threshold: int) -> str:
    """The charter section the writer cites for this document (see the module docstring)."""
    sid = CUES[reading(text, safety_score, harm_threshold)]
    return sid if sid in charter.sections else next(iter(charter.sections))


def format_voices(voices: dict[str, str]) -> str:
    """The reflection text: one labelled line per voice (the review store's format, rubric.VOICE_LABELS)."""
    return "\n".join(f"{VOICE_LABELS[v]}: {voices[v]}" for v in VOICES)
