"""Build the question pool: families × levels, stable splits, duplicate report (stage `items`)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random, stable_split
from decision_pipeline.common.params import rule
from decision_pipeline.questions import families
from decision_pipeline.questions.families import FAMILIES
from decision_pipeline.questions.schema import load_external_questions, normalised_key, to_row, validate_question

# pool: SFT (and the tokenizer); bench: the synthetic S1MB benchmarks alone (no training, calibration or
# evaluation step reads it); rl: fresh questions only RL sees; dev / eval / calibration: held out
SPLITS = ("pool", "bench", "rl", "dev", "eval", "calibration")
BENCH_SPLIT = "bench"
# every split but the training pool: none of them may reach pretraining, and an RL candidate twin of one leaks
HELD_OUT_SPLITS = tuple(s for s in SPLITS if s != "pool")


@dataclass
class ItemsParams:
    """`families` × `levels` × `per_cell` built-in questions, plus an optional external file."""
    families: list[str] = rule(choices=tuple(FAMILIES), nonempty=True, doc="question families to generate")
    levels: list[int] = rule(min=0, max=4, nonempty=True, doc="difficulty levels to generate for every family")
    per_cell: int = rule(min=1, max=100_000, doc="questions per (family, level) cell")
    splits: dict[str, float] = rule(keys=SPLITS, min=0.0, max=1.0,
                                    doc="fraction per split (pool, bench, rl, dev, eval, calibration), taken in the "
                                        "order written; sums to 1. `rl` holds fresh questions only RL trains on; "
                                        "`bench` the questions the synthetic S1MB benchmarks alone are built from "
                                        "(0 where s1mb_data reads an export)")
    external: str = rule(external=True, doc="JSONL/Parquet question file split like the rest (a dep of the stage); "
                             "configs/external/none = none")
    seed_offset: int = rule(min=0, doc="added to base.seed for the generated questions alone: a noise study "
                            "regenerates the data with it (reporting/review/noise_study.py, source data)")

    def __post_init__(self) -> None:
        if set(self.splits) != set(SPLITS) or abs(sum(self.splits.values()) - 1) > 1e-9:
            raise PipelineError(f"params.yaml: items.splits needs keys {', '.join(SPLITS)} with fractions summing to 1")


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
    """Duplicates (same normalised key: question, list items and options in any order) before they are dropped."""
    by_key: dict[str, set[str]] = {}
    counts = Counter()
    for q in questions:
        key = normalised_key(q)
        counts[key] += 1
        by_key.setdefault(key, set()).add(splits[q["id"]])
    return {"duplicate_questions": sum(c - 1 for c in counts.values()),
            "cross_split_duplicates": sum(1 for s in by_key.values() if len(s) > 1),
            "unique_questions": len(counts)}


def check_unique_ids(questions: list[dict], external: str) -> None:
    """Ids key every downstream record (chains, evaluations), so a repeat is an error naming where it is."""
    ids = Counter(q["id"] for q in questions)
    dup_ids = [i for i, c in ids.items() if c > 1]
    if dup_ids:
        where = external or "items"
        raise PipelineError(f"{where}: question id {dup_ids[0]!r} occurs more than once (the built-in ids are "
                            "family-Lk-NNNNN); ids must be unique")


def build_items(p: ItemsParams, seed: int) -> tuple[list[dict], dict]:
    """The stage's table rows (sorted by id) and its metrics; duplicate ids are an error."""
    questions = build_questions(p.families, p.levels, p.per_cell, seed)
    external = load_external_questions(p.external) if p.external else []
    check_unique_ids(questions + external, p.external)
    questions += external
    splits = assign_splits(questions, dict(p.splits))
    report = duplicate_report(questions, splits)
    questions = drop_duplicates(questions)
    rows = sorted((to_row(q, splits[q["id"]]) for q in questions), key=lambda r: r["id"])
    per_split = Counter(splits[q["id"]] for q in questions)
    metrics = {"n_items": len(rows), "splits": {s: per_split.get(s, 0) for s in SPLITS},
               "families": dict(sorted(Counter(q["family"] for q in questions).items())),
               "tasks": dict(sorted(Counter(q["task"] for q in questions).items())),
               **report, "duplicates_dropped": report["duplicate_questions"]}
    return rows, metrics


def drop_duplicates(questions: list[dict]) -> list[dict]:
    """One question per normalised key, the lowest id kept (a documented, order-free tie-break).

    Why: a duplicate inside eval counts one question twice in every accuracy and CI; inside
    the pool it doubles one question's weight in training. Twins always share a split
    (the split hashes the key), so keeping one per key loses no split's coverage.
    """
    kept: dict[str, dict] = {}
    for q in sorted(questions, key=lambda q: q["id"]):
        kept.setdefault(normalised_key(q), q)
    return list(kept.values())
