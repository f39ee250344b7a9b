"""Prediction validation (§3.3, §8): one-line errors naming benchmark, case and question."""
import math

import pytest
from tests.bench.s1mb_helpers import choice, noul, split

from decision_pipeline.bench.s1mb import Decision, Prediction, S1MBError, parse_prediction, score_decisions
from decision_pipeline.common.errors import PipelineError

BID = "x-choice-test-v1"


def run(decisions, predictions, task="choice"):
    return score_decisions(task, decisions, predictions, BID)


def one_choice():
    return [Decision("c-3", "q1", ("a", "b"), {"a": 1.0, "b": 0.0})]


def test_key_mismatch_message_is_one_line_with_location():
    with pytest.raises(S1MBError) as err:
        run(one_choice(), [Prediction("c-3", "q1", {"A": 0.5, "B": 0.5})])
    assert str(err.value) == (
        "S1MB: benchmark 'x-choice-test-v1' case 'c-3' question 'q1': "
        "prediction keys ['A','B'] differ from option ids ['a','b']"
    )
    assert isinstance(err.value, PipelineError)


def test_missing_and_extra_keys_are_rejected():
    with pytest.raises(S1MBError, match="differ from option ids"):
        run(one_choice(), [Prediction("c-3", "q1", {"a": 1.0})])
    with pytest.raises(S1MBError, match="differ from option ids"):
        run(one_choice(), [Prediction("c-3", "q1", {"a": 0.5, "b": 0.5, "c": 0.0})])


@pytest.mark.parametrize("probs, problem", [
    ({"a": 1.5, "b": -0.5}, "outside \\[0, 1\\]"),
    ({"a": math.nan, "b": 0.5}, "not finite"),
    ({"a": math.inf, "b": 0.0}, "not finite"),
    ({"a": 0.6, "b": 0.6}, "sum to 1.2"),
    ({"a": True, "b": 0.0}, "not a number"),
    ({"a": "0.5", "b": 0.5}, "not a number"),
])
def test_bad_probabilities_are_rejected(probs, problem):
    with pytest.raises(S1MBError, match=problem) as err:
        run(one_choice(), [Prediction("c-3", "q1", probs)])
    assert "case 'c-3' question 'q1'" in str(err.value) and "\n" not in str(err.value)


def test_sum_tolerance_is_1e_5_absolute_without_renormalisation():
    ok = run(one_choice(), [Prediction("c-3", "q1", {"a": 0.500009, "b": 0.5})])
    assert ok["target_mass_at_prediction"] == 1.0
    with pytest.raises(S1MBError, match="not within 1e-5"):
        run(one_choice(), [Prediction("c-3", "q1", {"a": 0.500011, "b": 0.5})])


def test_targets_are_validated_like_predictions():
    bad = [Decision("c-3", "q1", ("a", "b"), {"a": 0.7, "b": 0.7})]
    with pytest.raises(S1MBError, match="target probabilities sum"):
        run(bad, [])


def test_duplicate_and_unknown_prediction_ids_are_rejected():
    pairs = [choice("c1", "ab", {"a": 1}, {"a": 1})]
    decisions, predictions = split(pairs)
    with pytest.raises(S1MBError, match="duplicate prediction") as err:
        run(decisions, predictions + [Prediction("c1", "q", error="ValueError")])
    assert "case 'c1' question 'q'" in str(err.value)
    with pytest.raises(S1MBError, match="not in the benchmark"):
        run(decisions, [Prediction("c9", "q", {"a": 1.0, "b": 0.0})])


def test_prediction_needs_exactly_one_of_probabilities_and_error():
    with pytest.raises(S1MBError, match="exactly one"):
        Prediction("c1", "q", {"a": 1.0}, "ValueError")
    with pytest.raises(S1MBError, match="exactly one"):
        parse_prediction({"case_id": "c1", "question_id": "q", "probabilities": None, "error": None})
    with pytest.raises(S1MBError, match="unexpected \\['extra'\\]"):
        parse_prediction({"case_id": "c1", "question_id": "q", "error": "E", "extra": 1})


def test_long_option_lists_are_shortened_but_name_the_difference():
    ids = tuple(f"i{n}" for n in range(151))
    d = [Decision("c1", "q", ids, {o: (1.0 if o == "i0" else 0.0) for o in ids})]
    pred = {o: (1.0 if o == "i0" else 0.0) for o in ids[:-1]} | {"zz": 0.0}
    with pytest.raises(S1MBError) as err:
        run(d, [Prediction("c1", "q", pred)])
    text = str(err.value)
    assert "missing ['i150'], unexpected ['zz']" in text and len(text) < 400


def test_noul_keys_are_checked_too():
    decisions, _ = split(noul(1, 1.0, 1.0))
    with pytest.raises(S1MBError, match="differ from option ids \\['false','true'\\]"):
        run(decisions, [Prediction("c0", "q", {"yes": 1.0, "no": 0.0})], task="noul")


@pytest.mark.parametrize("task, decision, problem", [
    ("noul", Decision("c1", "q", ("no", "yes"), {"no": 1.0, "yes": 0.0}), "exactly 'false' and 'true'"),
    ("choice", Decision("c1", "q", ("a", "a"), {"a": 1.0}), "distinct option ids"),
    ("score", Decision("c1", "q", ("a", "b"), {"a": 1.0, "b": 0.0}), "one numeric value per option"),
    ("score", Decision("c1", "q", ("a", "b"), {"a": 1.0, "b": 0.0}, (2.0, 2.0)), "not all equal"),
    ("score", Decision("c1", "q", ("a", "b"), {"a": 1.0, "b": 0.0}, (0.0, math.inf)), "finite"),
])
def test_hand_built_decisions_are_checked(task, decision, problem):
    with pytest.raises(S1MBError, match=problem) as err:
        score_decisions(task, [decision], [], BID)
    assert "case 'c1' question 'q'" in str(err.value)
