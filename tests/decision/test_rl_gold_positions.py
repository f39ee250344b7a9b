"""RL that learns the task, not a position (#35.6): the balancing rule of `rl.gold_positions`, by hand,
and that the letters shown, the parser and the correctness reward all follow the new order."""
from __future__ import annotations

from collections import Counter

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.rl.rewards import correctness
from decision_pipeline.decision.rl.run import arrange_gold_positions, balance_gold_positions, gold_positions
from decision_pipeline.decision.rl.trainer import prompt_rows
from decision_pipeline.questions.schema import gold_index, target_vector


def _q(qid: str, texts: list[str], gold: int, target: dict | None = None, task: str = "choice") -> dict:
    options = [{"id": f"o{i}", "text": t, "value": None} for i, t in enumerate(texts)]
    return {"id": qid, "family": "f", "level": 0, "task": task, "question": f"{qid}?", "options": options,
            "gold": f"o{gold}", "target": target or {o["id"]: float(i == gold) for i, o in enumerate(options)},
            "trace": ""}


def _texts(q: dict) -> list[str]:
    return [o["text"] for o in q["options"]]


def test_balancing_by_hand():
    count_target = {"o0": 0.0, "o1": 0.1, "o2": 0.8, "o3": 0.1}  # a soft count question: 0..3, gold 2
    questions = [_q("a", ["a0", "a1"], 0), _q("b", ["x", "y", "z"], 2), _q("c", ["c0", "c1"], 0),
                 _q("d", ["d0", "d1"], 0), _q("e", ["x", "y", "z"], 0),
                 _q("f", ["0", "1", "2", "3"], 2, count_target, task="score")]
    out = balance_gold_positions(questions)
    # 2 options: the 1st, 2nd, 3rd such question get slots 0, 1, 0; 3 options: 0, 1; 4 options: 0
    assert [_texts(q) for q in out] == [["a0", "a1"], ["z", "x", "y"], ["c1", "c0"], ["d0", "d1"],
                                        ["y", "x", "z"], ["2", "0", "1", "3"]]
    assert [gold_index(q) for q in out] == [0, 0, 1, 0, 1, 0]
    # the gold id and the target travel with their options
    assert [q["gold"] for q in out] == [q["gold"] for q in questions]
    assert target_vector(out[5]) == [0.8, 0.0, 0.1, 0.1]
    assert gold_positions(out)["by_option_count"] == {"2": [2, 1], "3": [1, 1, 0], "4": [1, 0, 0, 0]}
    assert gold_positions(questions)["by_option_count"] == {"2": [3, 0], "3": [1, 0, 1], "4": [0, 0, 1, 0]}
    assert gold_positions(questions)["top_share"] == pytest.approx(4 / 6)
    assert gold_positions(out)["top_share"] == pytest.approx(4 / 6)
    assert questions[1]["options"][2]["text"] == "z"  # the input is left as it was


def test_every_position_gets_floor_or_ceil_of_its_count():
    # 7 three-option questions, all gold at 0 as selected: balanced 3, 2, 2
    questions = [_q(f"q{i}", ["a", "b", "c"], 0) for i in range(7)]
    assert gold_positions(balance_gold_positions(questions))["by_option_count"] == {"3": [3, 2, 2]}
    assert Counter(_texts(q)[gold_index(q)] for q in balance_gold_positions(questions)) == {"a": 7}


def test_modes():
    questions = [_q("a", ["a0", "a1"], 0), _q("b", ["b0", "b1"], 0)]
    assert arrange_gold_positions(questions, "as_selected") == questions
    assert [gold_index(q) for q in arrange_gold_positions(questions, "balanced")] == [0, 1]
    with pytest.raises(PipelineError, match="rl.gold_positions"):
        arrange_gold_positions(questions, "shuffled")


class _ChatTok:
    """What prompt_rows needs of a tokenizer: the chat template (the user turn as it is)."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[0]["content"] + "\n<assistant>\n"


def test_prompt_labels_parser_and_reward_read_the_balanced_order():
    # yes/no as the items list them (yes first); the second of two 2-option questions gets its gold at B
    yes = _q("k1", ["yes", "no"], 0, task="noul")
    no_first = _q("k2", ["yes", "no"], 0, task="noul")
    rows = prompt_rows(_ChatTok(), balance_gold_positions([yes, no_first]))
    assert "A) yes\nB) no" in rows[0]["prompt"] and "A) no\nB) yes" in rows[1]["prompt"]
    assert [r["gold_index"] for r in rows] == [0, 1] and rows[1]["target"] == [0.0, 1.0]
    # a policy answering A every time is right on one of the two, as chance would be
    answers = ["...</think>\nAnswer: A", "...</think>\nAnswer: A"]
    scored = correctness(answers, [True, True], [r["gold_index"] for r in rows], [r["target"] for r in rows])
    assert scored == [1.0, -1.0]
    assert correctness(["...</think>\nAnswer: B"], [True], [rows[1]["gold_index"]], [rows[1]["target"]]) == [1.0]
