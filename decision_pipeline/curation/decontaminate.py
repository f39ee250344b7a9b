"""Held-out decontamination: drop pool documents that contain an evaluation question.

Why: the pool's `reasoning` register is written in the questions' own language,
and a crawl can hold benchmark questions with their answers. A base model that
saw an eval question with its answer in pretraining is not evaluated on held-out
data. A document is contaminated by a held-out question when its normalised
text contains the normalised question text and every option text as whole
words (exact-match decontamination; options can appear in any order or format).
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_WORDS = re.compile(r"[^\w]+")


def normalise(text: str) -> str:
    """Lower case, punctuation and whitespace runs to one space, padded so ` w ` finds whole words.

    Signs and punctuation are dropped, so "-3" matches "3": a false positive costs
    one pool document, a false negative an evaluation item.
    """
    return " " + " ".join(_WORDS.sub(" ", text.lower()).split()) + " "


@dataclass(frozen=True)
class HeldOutQuestion:
    id: str
    question: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Decontamination:
    kept: list[dict]
    removed: dict[str, list[str]]  # pool doc id -> ids of every held-out question it contains (input order)

    @property
    def questions_found(self) -> int:
        """Held-out questions found in at least one pool document (duplicates counted per id)."""
        return len({qid for ids in self.removed.values() for qid in ids})


def decontaminate(docs: Sequence[dict], held_out: Iterable[HeldOutQuestion]) -> Decontamination:
    """Split docs into kept and removed; order of kept docs is preserved.

    Questions are grouped by normalised text, so each document is searched once
    per distinct question string; the option check runs only on a text hit.
    """
    by_text: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
    for q in held_out:
        text = normalise(q.question)
        if text.strip():  # an option that normalises to nothing cannot be searched for: skip it, keep the rest
            by_text[text].append((q.id, tuple(o for o in map(normalise, q.options) if o.strip())))
    kept, removed = [], {}
    for doc in docs:
        body = normalise(doc["text"])
        hits = [qid for text, entries in by_text.items() if text in body
                for qid, options in entries if all(o in body for o in options)]
        if hits:
            removed[doc["id"]] = hits
        else:
            kept.append(doc)
    return Decontamination(kept, removed)
