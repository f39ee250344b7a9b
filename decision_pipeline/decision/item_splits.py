"""Build the question pool: families × levels, stable splits, duplicate report."""
from __future__ import annotations

from collections import Counter

from decision_pipeline.common.hashing import make_random, stable_split
from decision_pipeline.decision import families
from decision_pipeline.decision.questions import normalised_key, validate_question


def build_questions(family_names: list[str], levels: list[int], per_cell: int, seed: int) -> list[dict]:
    """`per_cell` questions for each (family, level), ids `family-Lk-00042`; seeded per cell."""
    out = []
    for fam in family_names:
        for level in levels:
            rng = make_random(seed, "items", fam, level)
            for i in range(per_cell):
                q = families.generate(fam, level, rng)
                q["id"] = f"{fam}-L{level}-{i:05d}"
                out.append(validate_question(q, q["id"]))
    return out


def assign_splits(questions: list[dict], fractions: dict[str, float]) -> dict[str, str]:
    """Split by SHA-256 of the normalised question text, so exact duplicates share a split.

    Hashing the content (not the id) is what keeps a repeated question from
    leaking from the training pool into eval; cross-split duplicates can then
    only come from external files, which name their own split.
    """
    return {q["id"]: stable_split(normalised_key(q), fractions) for q in questions}


def duplicate_report(questions: list[dict], splits: dict[str, str]) -> dict:
    """Exact duplicates (same normalised question and options) within and across splits."""
    by_key: dict[str, set[str]] = {}
    counts = Counter()
    for q in questions:
        key = normalised_key(q)
        counts[key] += 1
        by_key.setdefault(key, set()).add(splits[q["id"]])
    return {"duplicate_questions": sum(c - 1 for c in counts.values()),
            "cross_split_duplicates": sum(1 for s in by_key.values() if len(s) > 1),
            "unique_questions": len(counts)}
