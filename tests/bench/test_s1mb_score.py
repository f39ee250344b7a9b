"""Score metrics (spec §4.3): raw-value error form, normalised baseline, median semantics."""
import math
import statistics

import pytest
from tests.bench.s1mb_helpers import score, split

from decision_pipeline.bench.s1mb import METRIC_KEYS, score_decisions

SCALE = {"a": 10.0, "b": 30.0}


def metrics(pairs):
    decisions, predictions = split(pairs)
    return score_decisions("score", decisions, predictions, "x-score-test-v1")


def test_constant_prediction_equals_the_median_baseline():
    m = metrics([score("c1", SCALE, {"a": 1, "b": 0}, {"a": 0.5, "b": 0.5}),
                 score("c2", SCALE, {"a": 0, "b": 1}, {"a": 0.5, "b": 0.5})])
    assert list(m) == list(METRIC_KEYS["score"])
    assert m["normalized_expected_score_mae"] == 0.5 and m["normalized_score_rmse"] == 0.5
    assert m["constant_score_baseline"] == 0.5   # even N: mean of the two middle values (0, 1)
    assert m["constant_mae_baseline"] == 0.5
    assert m["baseline_adjusted_score"] == 0


def test_perfect_prediction_scores_one():
    m = metrics([score("c1", SCALE, {"a": 1, "b": 0}, {"a": 1, "b": 0}),
                 score("c2", SCALE, {"a": 0, "b": 1}, {"a": 0, "b": 1})])
    assert m["normalized_expected_score_mae"] == 0 and m["baseline_adjusted_score"] == 1


def test_error_uses_raw_values_not_normalised_values():
    # Prediction sums to 1 + 8e-6 (allowed). Raw form: sum v (p - t) / (hi - lo)
    #   = (10 * 0.500008 + 30 * 0.5 - 30) / 20 = -0.499996
    # The normalised form E(p) - E(t) would give 0.5 - 1 = -0.5: a 4e-6 difference.
    pred = {"a": 0.500008, "b": 0.5}
    m = metrics([score("c1", SCALE, {"a": 0, "b": 1}, pred), score("c2", SCALE, {"a": 1, "b": 0}, {"a": 1, "b": 0})])
    raw = abs(10 * 0.500008 + 30 * 0.5 - 30) / 20
    normalised = abs((0 * 0.500008 + 1 * 0.5) - 1)
    assert m["normalized_expected_score_mae"] == pytest.approx(raw / 2, abs=1e-15)
    assert abs(m["normalized_expected_score_mae"] - normalised / 2) > 1e-6
    assert m["normalized_score_rmse"] == pytest.approx(math.sqrt(raw ** 2 / 2), abs=1e-15)


def test_baseline_uses_normalised_expected_values_and_odd_and_even_median():
    values = {"x": 1.0, "y": 2.0, "z": 5.0}  # lo 1, hi 5, normalised 0, .25, 1
    targets = [{"x": 1, "y": 0, "z": 0}, {"x": 0, "y": 1, "z": 0}, {"x": 0, "y": 0, "z": 1},
               {"x": 0, "y": 0.5, "z": 0.5}]
    expected = [0.0, 0.25, 1.0, 0.625]
    pairs = [score(f"c{i}", values, t, t) for i, t in enumerate(targets)]
    m = metrics(pairs)
    assert m["constant_score_baseline"] == statistics.median(expected) == (0.25 + 0.625) / 2
    c = 0.4375
    assert m["constant_mae_baseline"] == pytest.approx(sum(abs(e - c) for e in expected) / 4)
    odd = metrics(pairs[:3])
    assert odd["constant_score_baseline"] == 0.25


def test_three_to_five_criteria_with_negative_values():
    values = {"v1": -2.0, "v2": 0.0, "v3": 1.0, "v4": 6.0}  # width 8
    t = {"v1": 0.1, "v2": 0.2, "v3": 0.3, "v4": 0.4}
    p = {"v1": 0.4, "v2": 0.3, "v3": 0.2, "v4": 0.1}
    m = metrics([score("c1", values, t, p), score("c2", values, p, p)])
    e1 = (-2 * 0.3 + 0 * 0.1 + 1 * -0.1 + 6 * -0.3) / 8  # -0.3125
    assert m["normalized_expected_score_mae"] == pytest.approx(abs(e1) / 2)
    assert m["normalized_score_rmse"] == pytest.approx(math.sqrt(e1 ** 2 / 2))


def test_constant_targets_make_skill_null_and_partial_run_uses_all_targets():
    same = {"a": 0.25, "b": 0.75}
    m = metrics([score("c1", SCALE, same, same), score("c2", SCALE, same, same)])
    assert m["constant_mae_baseline"] == 0 and m["normalized_expected_score_mae"] == 0
    assert m["baseline_adjusted_skill"] is None and m["baseline_adjusted_score"] is None
    partial = metrics([score("c1", SCALE, {"a": 1, "b": 0}, {"a": 1, "b": 0}),
                       score("c2", SCALE, {"a": 0, "b": 1}, None),
                       score("c3", SCALE, {"a": 0, "b": 1}, None)])
    assert partial["constant_score_baseline"] == 1.0          # median of 0, 1, 1 over D
    assert partial["constant_mae_baseline"] == pytest.approx(1 / 3)
    assert partial["normalized_expected_score_mae"] == 0     # R is only c1
    assert partial["baseline_adjusted_score"] == 1
    none = metrics([score("c1", SCALE, {"a": 1, "b": 0}, None), score("c2", SCALE, {"a": 0, "b": 1}, None)])
    assert none["normalized_expected_score_mae"] is None and none["normalized_score_rmse"] is None
    assert none["baseline_adjusted_score"] is None and none["constant_mae_baseline"] == 0.5
