import json
import random

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.questions import families
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.questions.splits import (ItemsParams, assign_splits, build_items, build_questions,
                                                duplicate_report)
from decision_pipeline.questions.schema import (from_row, gold_index, list_parts, load_external_questions, normalised_key, to_row,
                                       user_message, validate_question)


@pytest.mark.parametrize("family", sorted(families.FAMILIES))
def test_every_family_and_level_is_valid_and_solver_is_right(family):
    rng = random.Random(1)
    for level in range(5):
        for _ in range(30):
            q = families.generate(family, level, rng)
            q["id"] = "x"
            v = validate_question(q, "test")
            assert v["trace"], "solver trace must be non-empty"
            gold_text = v["options"][gold_index(v)]["text"]
            # the trace's last line states the answer the gold option holds
            last = v["trace"].splitlines()[-1]
            if family == "keyword":
                assert (" not in " in last) == (v["gold"] == "false")
            else:
                assert gold_text in last


def test_levels_grow_the_search_space():
    rng = random.Random(2)
    n_opts = {lvl: len(families.larger(rng, lvl)["options"]) for lvl in range(5)}
    assert n_opts[0] <= n_opts[2] <= n_opts[4] and n_opts[4] > n_opts[0]
    lens = [len(families.keyword(rng, lvl)["question"]) for lvl in range(5)]
    assert lens[4] > lens[0]


def test_task_types_and_soft_targets():
    rng = random.Random(3)
    assert families.keyword(rng, 0)["task"] == "noul"
    assert families.category(rng, 0)["task"] == "choice"
    q = families.count(rng, 3)
    assert q["task"] == "score" and max(q["target"].values()) == 0.8 and abs(sum(q["target"].values()) - 1) < 1e-9


def test_build_is_deterministic_and_ids_unique():
    a = build_questions(["keyword", "count"], [0, 4], 5, seed=9)
    b = build_questions(["keyword", "count"], [0, 4], 5, seed=9)
    assert a == b and len({q["id"] for q in a}) == 20
    assert a != build_questions(["keyword", "count"], [0, 4], 5, seed=10)


def test_duplicates_share_a_split():
    qs = build_questions(["larger"], [0], 200, seed=1)  # 90 distinct level-0 questions
    splits = assign_splits(qs, {"pool": 0.5, "dev": 0.1, "eval": 0.25, "calibration": 0.15})
    rep = duplicate_report(qs, splits)
    assert rep["duplicate_questions"] > 0 and rep["cross_split_duplicates"] == 0


def test_shuffled_options_are_the_same_question():
    """A question seen in training with its options in another order is not held out."""
    q = {**families.generate("category", 2, random.Random(4)), "id": "one"}
    shuffled = {**q, "id": "other", "options": list(reversed(q["options"]))}
    assert normalised_key(q) == normalised_key(shuffled)
    splits = assign_splits([q, shuffled], {"pool": 0.5, "dev": 0.1, "eval": 0.25, "calibration": 0.15})
    assert splits[q["id"]] == splits["other"]
    assert duplicate_report([q, shuffled], splits) == {"duplicate_questions": 1, "cross_split_duplicates": 0,
                                                       "unique_questions": 1}
    different = {**q, "id": "x", "options": q["options"][:-1] + [{"id": "z", "text": "zebra crossing"}]}
    assert normalised_key(different) != normalised_key(q)


def test_row_round_trip(questions):
    q = questions[5]
    assert from_row(to_row(q, "eval")) == {**q, "split": "eval"}


@pytest.mark.parametrize("mutate,msg", [
    (lambda q: q.pop("gold"), "missing 'gold'"),
    (lambda q: q.update(gold="zz"), "gold 'zz' is not one of"),
    (lambda q: q.update(task="rank"), "task 'rank'"),
    (lambda q: q.update(options=q["options"][:1]), "needs 2..8 options"),
    (lambda q: q.update(target={"o0": 0.7, "o1": 0.7}), "summing to 1"),
])
def test_invalid_questions_name_the_problem(mutate, msg):
    q = {"id": "q1", "task": "choice", "question": "?", "gold": "o0",
         "options": [{"id": "o0", "text": "a"}, {"id": "o1", "text": "b"}]}
    mutate(q)
    with pytest.raises(PipelineError, match=msg):
        validate_question(q, "file.jsonl:3")


def test_external_file_malformed_line_reports_file_and_line(tmp_path):
    good = {"id": "e1", "task": "noul", "question": "Is it?", "gold": "true",
            "options": [{"id": "true", "text": "yes"}, {"id": "false", "text": "no"}]}
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(PipelineError, match=r"q.jsonl:2: malformed JSON"):
        load_external_questions(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "e2", "gold": None}) + "\n")
    with pytest.raises(PipelineError, match=r"q.jsonl:2: .*missing 'gold'"):
        load_external_questions(path)
    path.write_text(json.dumps(good) + "\n")
    assert load_external_questions(path)[0]["target"] == {"true": 1.0, "false": 0.0}
    with pytest.raises(PipelineError, match="not found"):
        load_external_questions(tmp_path / "missing.jsonl")


def test_user_message_letters_options(questions):
    q = next(x for x in questions if len(x["options"]) == 4)
    msg = user_message(q)
    assert "A) " in msg and "D) " in msg and "E) " not in msg


@pytest.mark.parametrize("text,n,expected", [
    ("<think>\nx\n</think>\nAnswer: B<|im_end|>", 3, 1),
    ("<think>\nAnswer: A is wrong\n</think>\nAnswer: C", 3, 2),
    ("<think>\nloop loop loop", 3, None),
    ("<think>\n</think>\nAnswer: D", 3, None),
    ("Answer: A", 2, 0),
])
def test_parse_answer(text, n, expected):
    assert parse_answer(text, n) == expected


def test_reordered_list_items_are_the_same_question():
    """"Is X in this list: a, b, c?" with the list reordered was seen in training: same key, same split."""
    q = {**families.generate("keyword", 3, random.Random(2)), "id": "one"}
    head, items = list_parts(q["question"])
    assert head.endswith("list:") and len(items) == 7
    reordered = {**q, "id": "two", "question": f"{head} {', '.join(reversed(items))}?"}
    assert normalised_key(q) == normalised_key(reordered)
    other = {**q, "id": "three", "question": f"{head} {', '.join(items[:-1] + ['zebra'])}?"}
    assert normalised_key(other) != normalised_key(q)
    assert list_parts("Which number is the largest?") is None


def test_build_items_drops_duplicates_keeping_the_lowest_id():
    p = ItemsParams(families=["larger"], levels=[0], per_cell=120,
                    splits={"pool": 0.33, "bench": 0.12, "rl": 0.1, "dev": 0.1, "eval": 0.2, "calibration": 0.15}, external="", seed_offset=0)
    rows, m = build_items(p, seed=3)
    keys = [normalised_key(from_row(r)) for r in rows]
    assert len(keys) == len(set(keys)) == m["n_items"] == m["unique_questions"]
    assert m["duplicates_dropped"] == 120 - m["n_items"] > 0
    first_by_key: dict[str, str] = {}
    for q in sorted(build_questions(["larger"], [0], 120, seed=3), key=lambda q: q["id"]):
        first_by_key.setdefault(normalised_key(q), q["id"])
    assert sorted(r["id"] for r in rows) == sorted(first_by_key.values())


def test_category_options_are_shuffled_at_every_level():
    for level in range(5):
        golds = {families.generate("category", level, random.Random(s))["gold"] for s in range(40)}
        assert len(golds) > 1, f"level {level}: the gold is always {golds}"
