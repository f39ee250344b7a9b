"""Held-out decontamination: what counts as containing an eval question, and what does not."""
from __future__ import annotations

import random

from decision_pipeline.curation.decontaminate import HeldOutQuestion, decontaminate, normalise
from decision_pipeline.questions.families import reasoning_text
from decision_pipeline.questions.splits import build_questions

CITY = HeldOutQuestion("q1", "Which one is a city?", ("tokyo", "hammer"))


def _docs(*texts: str) -> list[dict]:
    return [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)]


def test_question_with_all_options_in_any_format_is_contaminated():
    docs = _docs("Which one is a city? Options: tokyo; hammer.\ntokyo is a city.\nThe answer is tokyo.",
                 "which ONE is a   city?\n\nA) Hammer\nB) Tokyo",
                 "Which one is a city? Options: paris; hammer.",   # other options: a different question
                 "Tokyo is a city and a hammer is a tool.")         # option words present, question text not
    out = decontaminate(docs, [CITY])
    assert out.removed == {"d0": ["q1"], "d1": ["q1"]}
    assert [d["id"] for d in out.kept] == ["d2", "d3"] and out.questions_found == 1


def test_options_match_whole_words_only():
    q = HeldOutQuestion("q2", "How many are there?", ("7", "cat"))
    out = decontaminate(_docs("How many are there? 17 cats."), [q])
    assert out.removed == {}
    out = decontaminate(_docs("How many are there? 7, cat."), [q])
    assert out.removed == {"d0": ["q2"]}


def test_normalise_pads_and_folds_punctuation():
    assert normalise("  Which one,\nis A city?? ") == " which one is a city "
    assert normalise("").strip() == ""


def test_nothing_held_out_keeps_everything_in_order():
    docs = _docs("a b c", "d e f")
    assert decontaminate(docs, []).kept == docs
    assert decontaminate(docs, [HeldOutQuestion("q", "   ", ())]).kept == docs  # empty question text never matches


def test_pool_reasoning_docs_that_render_an_item_are_caught():
    """The real generators: reasoning documents that happen to render a held-out item are removed."""
    items = build_questions(["keyword", "category", "larger", "count"], [0, 1], 20, seed=3)
    held = [HeldOutQuestion(q["id"], q["question"], tuple(o["text"] for o in q["options"])) for q in items]
    rng = random.Random(0)
    docs = _docs(*(reasoning_text(rng) for _ in range(400)))
    out = decontaminate(docs, held)
    assert 0 < len(out.removed) < len(docs)
    by_id = {q.id: q for q in held}
    for doc_id, qids in out.removed.items():
        body = normalise(docs[int(doc_id[1:])]["text"])
        for qid in qids:
            assert normalise(by_id[qid].question) in body
            assert all(normalise(o) in body for o in by_id[qid].options)
    # duplicated held-out items (same text and options, two ids) are each counted as found
    assert out.questions_found == len({qid for qids in out.removed.values() for qid in qids})


def test_every_contained_question_is_counted():
    twin = HeldOutQuestion("q1b", CITY.question, tuple(reversed(CITY.options)))
    out = decontaminate(_docs("Which one is a city? tokyo or hammer"), [CITY, twin])
    assert out.removed == {"d0": ["q1", "q1b"]} and out.questions_found == 2


def test_a_reordered_list_question_is_still_caught():
    """A pool document holding a held-out list question with its list reordered saw that question."""
    from decision_pipeline.curation.decontaminate import held_out_questions
    q = {"id": "k1", "split": "eval", "question": "Is the word lamp in this list: door, lamp, cloud?",
         "options": [{"text": "no"}, {"text": "yes"}]}
    held = held_out_questions([q, {**q, "id": "p1", "split": "pool"}])
    assert [h.id for h in held] == ["k1"] and held[0].list_items == ("door", "lamp", "cloud")
    docs = _docs("Is the word lamp in this list: cloud, door, lamp? yes or no. Answer: yes",
                 "Is the word lamp in this list: cloud, lamp? yes / no",      # door missing: another question
                 "Is the word lamp in this list: door, lamp, cloud? no yes")
    out = decontaminate(docs, held)
    assert sorted(out.removed) == ["d0", "d2"] and [d["id"] for d in out.kept] == ["d1"]
