"""One prompt/parse contract: the prompt states the format the parser needs, a chain written
that way parses, and every other chain is counted under the reason it failed."""
from __future__ import annotations

import numpy as np
import pytest

from decision_pipeline.decision.sft.chains import judge_chain, select_per_question, selection_metrics
from decision_pipeline.decision.evaluate.evaluation import thinking_unparsed
from decision_pipeline.decision.parsing import UNPARSED_REASONS, parse_with_reason, unparsed_by_reason
from decision_pipeline.questions.schema import (ANSWER_INSTRUCTION, ANSWER_PREFIX, THINK_CLOSE, THINK_OPEN,
                                                  assistant_answer, user_message)

Q3 = {"id": "q3", "family": "larger", "gold": "o1", "question": "Which number is the largest?",
      "options": [{"id": f"o{i}", "text": str(i), "value": float(i)} for i in range(3)]}


def written_as_asked(body: str, letter: str) -> str:
    """A chain following the instruction's words literally: think inside the tags, then the line."""
    assert f"{THINK_OPEN} and {THINK_CLOSE}" in ANSWER_INSTRUCTION and f"`{ANSWER_PREFIX} X`" in ANSWER_INSTRUCTION
    return f"{THINK_OPEN}\n{body}\n{THINK_CLOSE}\n{ANSWER_PREFIX} {letter}"


def test_the_prompt_states_the_parsers_format():
    msg = user_message(Q3)
    assert msg.endswith(ANSWER_INSTRUCTION)
    assert "Reply with the letter" not in msg  # the old instruction never mentioned </think> or `Answer:`
    for needed in (THINK_OPEN, THINK_CLOSE, ANSWER_PREFIX):
        assert needed in ANSWER_INSTRUCTION


def test_a_chain_written_as_the_prompt_asks_parses():
    assert parse_with_reason(written_as_asked("1 < 2, so B.", "B"), 3) == (1, None)
    # the solver's traces (the default profile's teacher) are written through the same helper
    assert parse_with_reason(assistant_answer(Q3, "C", "2 is the largest."), 3) == (2, None)
    # a readout-style reply without a thinking block is still read whole
    assert parse_with_reason("Answer: A", 3) == (0, None)


@pytest.mark.parametrize("text,reason", [
    ("<think>\n1 < 2 so Answer: B", "no_think_close"),          # never closed: an answer inside does not count
    ("<think>\n1 < 2\n</think>\nThe answer is B.", "no_answer_line"),
    ("<think>\nAnswer: B\n</think>\nB", "no_answer_line"),      # only before </think>
    ("The letter is B", "no_answer_line"),
    ("<think>\nx\n</think>\nAnswer: D", "label_not_an_option"),  # 3 options: A-C
])
def test_other_chains_fail_with_their_reason(text, reason):
    assert parse_with_reason(text, 3) == (None, reason)


def test_select_chains_counts_unparsed_by_reason():
    def rec(sample: int, text: str, finish: str = "stop") -> dict:
        return {"question_id": "q3", "sample": sample, "source": "base", "text": text,
                "token_ids": [0] * 10, "finish_reason": finish, "n_tokens": 10 + sample}
    raw = [rec(0, written_as_asked("1 < 2", "B")), rec(1, "<think>\nstill going", "length"),
           rec(2, "<think>\nx\n</think>\nB"), rec(3, "<think>\nx\n</think>\nAnswer: E"),
           rec(4, "<think>\ny\n</think>\nIt is B")]
    judged = [judge_chain(r, Q3) for r in raw]
    assert [j["unparsed_reason"] for j in judged] == [None, "no_think_close", "no_answer_line",
                                                      "label_not_an_option", "no_answer_line"]
    m = selection_metrics([Q3], judged, select_per_question(judged))
    assert m["unparsed_by_reason"] == {"no_think_close": 1, "no_answer_line": 2, "label_not_an_option": 1}
    assert m["unparsed"] == 3 and m["loops_dropped"] == 1  # the cap hit is a loop, its reason still counted
    assert m["kept"] == 1


def test_evaluate_counts_unparsed_by_reason():
    qs = [{**Q3, "id": f"e{i}"} for i in range(4)]
    chains = ["x\n</think>\nAnswer: B", "x and on", "x\n</think>\nB", "x\n</think>\nAnswer: H"]  # after `<think>\n`
    records = [{"id": q["id"], "chain": c, "thinking_pred": None, "readout_logits": list(np.zeros(3))}
               for q, c in zip(qs, chains)]
    assert thinking_unparsed(records, qs) == {"no_think_close": 1, "no_answer_line": 1, "label_not_an_option": 1}
    assert set(unparsed_by_reason([])) == set(UNPARSED_REASONS)
