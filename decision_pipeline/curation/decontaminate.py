"""Held-out decontamination: drop pool documents that contain an evaluation question.

Why: the pool's `reasoning` register is written in the questions' own language,
and a crawl can hold benchmark questions with their answers. A base model that
saw an eval question with its answer in pretraining is not evaluated on held-out
data. A document is contaminated by a held-out question when its normalised
text contains the normalised question text and every option text as whole
words (exact-match decontamination; options can appear in any order or format).
A question ending in a list ("…in this list: a, b, c?") also matches a document
holding its head and every list item in any order: a reordered list is the same
question (`questions.normalised_key` says so too).
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from decision_pipeline.questions.schema import list_parts

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
    list_head: str = ""               # for a list question: the text before the list ...
    list_items: tuple[str, ...] = ()  # ... and its items, matched in any order


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
        text = normalise(q.list_head) if q.list_items else normalise(q.question)
        # list items are searched like options (whole words, any order); empty ones cannot be searched for
        needles = tuple(o for o in map(normalise, (*q.options, *q.list_items)) if o.strip())
        if text.strip():
            by_text[text].append((q.id, needles))
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


def held_out_questions(items: Sequence[dict]) -> list[HeldOutQuestion]:
    """Every question outside the training pool split (held-out and RL-fresh): none may reach pretraining."""
    out = []
    for q in items:
        if q["split"] == "pool":
            continue
        head, list_items = list_parts(q["question"]) or ("", [])
        out.append(HeldOutQuestion(q["id"], q["question"], tuple(o["text"] for o in q["options"]), head,
                                   tuple(list_items)))
    return out
