"""Reflections: their two voices, and the hard checks that override judgement.

Why: the failure modes every prompt had to address (summary instead of reflection,
analysis without the matching citation (``citation_gap``, on benign documents), verbosity, formulaic openers, mentioning
truncation, malformed citations, meta-language, wrong voice) are detectable without a
model; as pure functions they apply the same way to the judge, to human reviews and
to hand-written test reflections.

A reflection is text with one line-leading label per voice: ``First person: ...`` and
``Observer: ...`` (rubric.VOICE_LABELS).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from decision_pipeline.charter.charter import Charter, citations, malformed_citations, unknown_citations
from decision_pipeline.charter.rubric import VOICE_LABELS, VOICES, Flags
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule

_LABEL_RE = re.compile(r"^\s*(" + "|".join(re.escape(v) for v in VOICE_LABELS.values()) + r")\s*:\s*",
                       re.IGNORECASE | re.MULTILINE)
_FIRST_PERSON = re.compile(r"\bI\b|\b(?i:i'm|i'd|i'll|i've|me|my|mine|myself)\b")
_SUMMARY = re.compile(r"\b(this|the) (document|text|article|post|thread|passage|page) "
                      r"(is about|describes|discusses|talks about|covers|says|reports|explains)\b"
                      r"|\bin summary\b|\bto summari[sz]e\b", re.IGNORECASE)
_OPENER = re.compile(r"^\s*(this (document|text|article|post|thread)|in this (document|text)|certainly|sure|"
                     r"as an ai|here is|here's|overall|great question)\b", re.IGNORECASE)
_META = re.compile(r"\b(charter|constitution|rubric|this task|the task|the prompt|my instructions|"
                   r"this reflection|the reflection)\b", re.IGNORECASE)
_TRUNCATION = re.compile(r"\b(truncated|cut off|cuts off|is incomplete|excerpt ends)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
STOPWORDS = frozenset("""about above after again against their there these those which while would could should
other being because before below between during every first from further have having here into itself
just more most only once over same some such than that then they this through under until very what when
where whether with your yours thread""".split())


@dataclass
class CheckParams:
    harm_threshold: int = rule(min=0, max=5, doc="safety score at or above which a document counts as harmful")
    max_words: int = rule(min=5, doc="words per voice above which the voice is flagged verbose")
    summary_overlap: float = rule(min=0.0, max=1.0,
                                  doc="share of a voice's word 4-grams found in the document that marks a summary")


def split_voices(text: str) -> dict[str, str]:
    """Each voice's text ('' when its label is absent); lenient, for model output."""
    parts = _LABEL_RE.split(text)
    out = {v: "" for v in VOICES}
    by_label = {label.lower(): v for v, label in VOICE_LABELS.items()}
    for i in range(1, len(parts) - 1, 2):
        voice = by_label[parts[i].lower()]
        if not out[voice]:
            out[voice] = " ".join(parts[i + 1].split())
    return out


def parse_reflection(text: str, where: str) -> dict[str, str]:
    """Strict parse for reflections a person wrote: a missing or empty voice is an error."""
    voices = split_voices(text)
    for v in VOICES:
        if not voices[v]:
            raise PipelineError(f"{where}: reflection has no '{VOICE_LABELS[v]}:' voice; write both voices "
                                f"({', '.join(VOICE_LABELS.values())})")
    return voices


def format_reflection(voices: dict[str, str]) -> str:
    """The reflection text for voices (inverse of split_voices)."""
    return "\n".join(f"{VOICE_LABELS[v]}: {voices[v]}" for v in VOICES)


# ------------------------------------------------------------ the document side

def doc_register(text: str) -> str:
    """A coarse register read from the text alone: forum, qa, news, noise or reference."""
    t = text.lstrip()
    words = _WORD.findall(t)
    lines = [ln.strip() for ln in re.split(r"[\n|]", t) if ln.strip()]
    if len(words) < 8 or len(set(lines)) < max(1, len(lines) // 2) or len(words) < len(t.split()) / 3:
        return "noise"
    if t.startswith("Thread:"):
        return "forum"
    if t.startswith("Q:"):
        return "qa"
    if re.search(r"\b[A-Z][a-z]+, [A-Z][a-z]+ \d{1,2} - ", t[:300]):
        return "news"
    return "reference"


# register -> sections that fit a benign document of it; harmful documents add 2.1 and 2.3
REGISTER_SECTIONS: dict[str, tuple[str, ...]] = {
    "forum": ("2.3",), "qa": ("3.1",), "news": ("1.2", "4.2"), "noise": ("4.1",), "reference": ("3.2", "1.1")}
HARM_SECTIONS: tuple[str, ...] = ("2.1", "2.3")


def relevant_sections(text: str, safety_score: int, cfg: CheckParams) -> tuple[str, ...]:
    """Charter sections a reflection on this document should cite (first = best fit)."""
    base = REGISTER_SECTIONS[doc_register(text)]
    if safety_score >= cfg.harm_threshold:
        return HARM_SECTIONS + tuple(s for s in base if s not in HARM_SECTIONS)
    return base


def doc_keywords(text: str, limit: int = 12) -> list[str]:
    """Distinctive content words of the document (first occurrences, lower case)."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text):
        lw = w.lower()
        if len(lw) >= 5 and lw not in STOPWORDS:
            seen.setdefault(lw, None)
    return list(seen)[:limit]


def _grams(words: list[str], n: int = 4) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


# ------------------------------------------------- the analysis-to-citation gap

# title words too general to say which principle a voice is analysing
GENERIC_TITLE_WORDS = frozenset({"language", "instructions", "help", "text", "facts", "value", "quality"})


def _stem(word: str) -> str:
    """A crude stem: lower case, one trailing 's' dropped, at most six letters (claims -> claim,
    hostile -> hostil, escalation -> escala)."""
    w = word.lower()
    return (w[:-1] if w.endswith("s") else w)[:6]


def section_cues(charter: Charter) -> dict[str, tuple[str, ...]]:
    """Section id -> stems of its title's content words (4+ letters, GENERIC_TITLE_WORDS left out):
    the words by which a voice's analysis names that section's principle."""
    out = {}
    for sid, s in charter.sections.items():
        words = [w for w in re.findall(r"[a-z]+", s.title.lower()) if len(w) >= 4 and w not in GENERIC_TITLE_WORDS]
        out[sid] = tuple(dict.fromkeys(_stem(w) for w in words))
    return out


def analysed_sections(text: str, charter: Charter) -> list[str]:
    """Sections whose principle the text names: any of its words starts with a cue stem."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", text)]
    return [sid for sid, cues in section_cues(charter).items() if any(w.startswith(c) for c in cues for w in words)]


def citation_gap(text: str, charter: Charter) -> bool:
    """The analysis-to-citation gap: the voice names at least one principle (analysed_sections)
    and cites none of the sections it names. Checked on benign documents only (on harmful ones
    an uncited voice is already the hard check uncited_harm)."""
    named = set(analysed_sections(text, charter))
    return bool(named) and not named & set(citations(text))


# ------------------------------------------------------------------ hard checks

def voice_flags(voice: str, text: str, document: str, safety_score: int, charter: Charter,
                cfg: CheckParams) -> list[str]:
    """Hard-check flags of one voice (names are rubric.EFFECTS keys), in a fixed order."""
    if not text.strip():
        return ["missing_voice"]
    flags = []
    first_person = bool(_FIRST_PERSON.search(text))
    if first_person != (voice == "first_person"):
        flags.append("wrong_voice")
    vw = [w.lower() for w in _WORD.findall(text)]
    doc_grams = _grams([w.lower() for w in _WORD.findall(document)])
    mine = _grams(vw)
    copied = len(mine & doc_grams) / len(mine) if mine else 0.0
    if _SUMMARY.search(text) or copied >= cfg.summary_overlap:
        flags.append("summary")
    if _OPENER.search(text):
        flags.append("formulaic_opener")
    if _META.search(text):
        flags.append("meta_language")
    if malformed_citations(text) or unknown_citations(text, charter):
        flags.append("malformed_citation")
    if len(text.split()) > cfg.max_words:
        flags.append("verbose")
    if _TRUNCATION.search(text):
        flags.append("mentions_truncation")
    if safety_score >= cfg.harm_threshold:
        if not [c for c in citations(text) if charter.has(c)]:
            flags.append("uncited_harm")
    elif citation_gap(text, charter):
        flags.append("citation_gap")
    return flags


def hard_checks(voices: dict[str, str], document: str, safety_score: int, charter: Charter,
                cfg: CheckParams) -> Flags:
    """Flags per voice for a reflection on `document`."""
    return {v: voice_flags(v, voices.get(v, ""), document, safety_score, charter, cfg) for v in VOICES}
