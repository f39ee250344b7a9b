"""Choice metrics (spec §4.2): argmax ties, soft targets, F_id / F_pos baselines."""
import pytest
from tests.bench.s1mb_helpers import choice, split

from decision_pipeline.bench.s1mb import METRIC_KEYS, score_decisions


def metrics(pairs):
    decisions, predictions = split(pairs)
    return score_decisions("choice", decisions, predictions, "x-choice-test-v1")


def test_argmax_tie_goes_to_earliest_authored_option():
    tie = {"a": 0.2, "b": 0.4, "c": 0.4}
    assert metrics([choice("c1", "abc", {"c": 1}, tie)])["target_mass_at_prediction"] == 0  # picks b
    assert metrics([choice("c1", "acb", {"c": 1}, tie)])["target_mass_at_prediction"] == 1  # picks c
    even = {"a": 0.5, "b": 0.5}
    assert metrics([choice("c1", "ba", {"b": 1}, even)])["target_mass_at_prediction"] == 1


def test_soft_target_gives_expected_agreement():
    m = metrics([choice("c1", "ab", {"a": 0.7, "b": 0.3}, {"a": 0.6, "b": 0.4}),
                 choice("c2", "ab", {"a": 0.2, "b": 0.8}, {"a": 0.6, "b": 0.4})])
    assert m["target_mass_at_prediction"] == pytest.approx((0.7 + 0.2) / 2)


def test_fixed_id_baseline_with_varying_option_counts():
    # F_id(a) = (1 + 1 + 1/2 [a absent: uniform] + 0) / 4 = 0.625 beats F_pos (7/12) and U.
    m = metrics([
        choice("c1", "ab", {"a": 1}, {"a": 1}),
        choice("c2", "bac", {"a": 1}, {"a": 1}),
        choice("c3", "cd", {"c": 0.5, "d": 0.5}, {"c": 1}),
        choice("c4", "abcd", {"d": 1}, {"d": 1}),
    ])
    assert list(m) == list(METRIC_KEYS["choice"])
    assert m["uniform_accuracy_baseline"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 2 + 1 / 4) / 4)
    assert m["fixed_answer_accuracy_baseline"] == pytest.approx(0.625)
    assert m["target_mass_at_prediction"] == pytest.approx(3.5 / 4)
    assert m["baseline_adjusted_skill"] == pytest.approx((0.875 - 0.625) / 0.375)


def test_fixed_position_baseline_wins_when_ids_differ_but_position_repeats():
    # Answer "first option" is right in c1, c2 and half of c3: F_pos = 2.5/3; best id only 2/3.
    m = metrics([
        choice("c1", "ab", {"a": 1}, {"b": 1}),
        choice("c2", "cd", {"c": 1}, {"c": 1}),
        choice("c3", "ef", {"e": 0.5, "f": 0.5}, {"e": 1}),
    ])
    assert m["fixed_answer_accuracy_baseline"] == pytest.approx(2.5 / 3)
    assert m["target_mass_at_prediction"] == pytest.approx(1.5 / 3)
    assert m["baseline_adjusted_skill"] == pytest.approx((0.5 - 2.5 / 3) / (1 - 2.5 / 3))  # -2
    assert m["baseline_adjusted_score"] == 0


def test_position_past_a_questions_options_falls_back_to_uniform():
    # Position 3 exists only in c2 (target there); c1 has 2 options -> counts 1/2.
    m = metrics([choice("c1", "xy", {"x": 0.5, "y": 0.5}, {"x": 1}),
                 choice("c2", "pqr", {"r": 1}, {"r": 1})])
    # F_pos(3) = (1/2 + 1) / 2 = 0.75; F_id(r) = (1/2 + 1) / 2 = 0.75 too; U = (1/2 + 1/3) / 2.
    assert m["fixed_answer_accuracy_baseline"] == pytest.approx(0.75)
    assert m["uniform_accuracy_baseline"] == pytest.approx(5 / 12)


def test_uniform_baseline_of_2_and_3_options_matches_upstream_fixture():
    m = metrics([choice("c1", "ab", {"b": 1}, {"b": 1}), choice("c2", "abc", {"c": 1}, {"c": 1})])
    assert m["uniform_accuracy_baseline"] == pytest.approx(0.41666666666666663)
    assert m["fixed_answer_accuracy_baseline"] == pytest.approx(0.75)
    assert m["baseline_adjusted_score"] == 1


def test_majority_answer_scores_zero_and_partial_run_keeps_full_baseline():
    pairs = [choice(f"c{i}", "ab", {"a": 1}, {"a": 1}) for i in range(4)]
    pairs.append(choice("c4", "ab", {"b": 1}, {"a": 1}))
    m = metrics(pairs)
    assert m["target_mass_at_prediction"] == pytest.approx(0.8)
    assert m["fixed_answer_accuracy_baseline"] == pytest.approx(0.8)
    assert m["baseline_adjusted_score"] == 0
    decisions, predictions = split(pairs)
    partial = score_decisions("choice", decisions, predictions[-1:])  # only the wrong one succeeded
    assert partial["fixed_answer_accuracy_baseline"] == pytest.approx(0.8)  # baseline still over D
    assert partial["target_mass_at_prediction"] == 0
    assert partial["baseline_adjusted_skill"] == pytest.approx(-4)
    assert partial["baseline_adjusted_score"] == 0


def test_no_successful_predictions_and_saturated_baseline_give_nulls():
    failed = metrics([choice("c1", "ab", {"a": 1}, None), choice("c2", "ab", {"b": 1}, None)])
    assert failed["target_mass_at_prediction"] is None
    assert failed["baseline_adjusted_skill"] is None and failed["baseline_adjusted_score"] is None
    assert failed["uniform_accuracy_baseline"] == 0.5
    saturated = metrics([choice(f"c{i}", "ab", {"a": 1}, {"a": 1}) for i in range(3)])
    assert saturated["fixed_answer_accuracy_baseline"] == 1
    assert saturated["target_mass_at_prediction"] == 1
    assert saturated["baseline_adjusted_skill"] is None  # b >= 1 - eps


def test_151_option_question_picks_argmax():
    ids = [f"intent_{i:03d}" for i in range(151)]
    pred = {o: 0.0 for o in ids}
    pred["intent_150"] = 0.6
    pred["intent_007"] = 0.4
    m = metrics([choice("c1", ids, {"intent_150": 1}, pred), choice("c2", ids, {"intent_007": 1}, pred)])
    assert m["target_mass_at_prediction"] == 0.5
    assert m["uniform_accuracy_baseline"] == pytest.approx(1 / 151)
    assert m["fixed_answer_accuracy_baseline"] == pytest.approx(0.5)
