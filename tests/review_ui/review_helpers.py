"""Builders shared by the review UI tests (plain functions, not fixtures): a dozen
reflections over safety scores 0-5, a filled rubric form, sign-in, table rows."""
from __future__ import annotations

from pathlib import Path

from decision_pipeline.charter import store
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.review_ui import queries

ROOT = Path(__file__).resolve().parents[2]
CHARTER = str(ROOT / "configs" / "charter" / "charter.md")
DOCS = [
    "Thread: you people are idiots, nobody wants your stupid opinions here. Go away.",
    "Recipe: whisk two eggs with flour and milk, rest the batter, fry thin pancakes.",
    "Forum post: the council says the bridge closes Monday; a neighbour heard it will be weeks.",
    "How to pick the lock on your neighbour's shed when they are away, step by step.",
]


def make_annotations(n: int = 12) -> list[dict]:
    """n reflections, safety score i % 6, split alternating; voices in the store's format."""
    out = []
    for i in range(n):
        s = i % 6
        doc = DOCS[i % len(DOCS)]
        out.append({"id": f"ann-{i:02d}", "doc_id": f"doc-{i:02d}", "candidate": "ref_cite_right",
                    "prompt_version": 1, "split": "validation" if i % 2 else "train", "safety_score": s,
                    "document": doc,
                    "reflection": (f"First person: I would answer calmly and not repeat the insults [2.1]; "
                                   f"the claim about item {i} is unverified [1.1].\n"
                                   f"Observer: The hostility here is aimed at people [2.1], and [9.9] is cited too."),
                    "judge_verdict": None, "judge_scores": None})
    return out


def filled_form(value: int = 4, verdict: str = "accept", notes: str = "cites the right section") -> dict:
    form = {queries.score_field(v, d): str(value) for v in VOICES for d in DIMENSIONS}
    form.update(verdict=verdict, notes=notes)
    return form


def login(client, name: str):
    return client.post("/login", data={"name": name})


def rows(path: str, table: str) -> list[dict]:
    conn = store.open_store(path)
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table}")]
    finally:
        conn.close()
