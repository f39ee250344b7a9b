"""Noul metrics (spec §4.1, §5 worked example), checked against hand-computed numbers."""
import pytest
from tests.bench.s1mb_helpers import noul, split

from decision_pipeline.bench.s1mb import METRIC_KEYS, score_decisions


def metrics(pairs):
    decisions, predictions = split(pairs)
    return score_decisions("noul", decisions, predictions, "x-noul-test-v1")


def test_worked_example_tp1_fn10_fp0_tn89():
    m = metrics(noul(1, 1.0, 1.0) + noul(10, 1.0, 0.0, start=1) + noul(89, 0.0, 0.0, start=11))
    assert list(m) == list(METRIC_KEYS["noul"])
    assert (m["true_positive"], m["false_negative"], m["false_positive"], m["true_negative"]) == (1, 10, 0, 89)
    assert m["accuracy"] == pytest.approx(0.90)
    assert m["positive_recall"] == pytest.approx(1 / 11)          # 0.0909
    assert m["specificity"] == 1 and m["precision"] == 1
    assert m["balanced_accuracy"] == pytest.approx(6 / 11)        # 0.5455
    assert round(m["balanced_accuracy"], 4) == 0.5455
    assert m["baseline_adjusted_skill"] == pytest.approx(1 / 11)  # 2*BA - 1
    assert round(m["baseline_adjusted_score"], 4) == 0.0909
    assert m["f1"] == pytest.approx(2 / 12)
    assert m["binary_brier"] == pytest.approx(0.1)                # 10 errors of 1, /100
    assert m["positive_prevalence"] == pytest.approx(0.11)
    assert m["majority_accuracy_baseline"] == pytest.approx(0.89)
    assert m["constant_brier_baseline"] == pytest.approx(0.11 * 0.89)  # pi(1-pi) = 0.0979
    assert m["brier_skill"] == pytest.approx(1 - 0.1 / 0.0979)


def test_always_false_has_higher_accuracy_baseline_but_zero_score():
    m = metrics(noul(11, 1.0, 0.0) + noul(89, 0.0, 0.0, start=11))
    assert m["accuracy"] == pytest.approx(0.89)
    assert m["positive_recall"] == 0 and m["specificity"] == 1
    assert m["balanced_accuracy"] == 0.5
    assert m["baseline_adjusted_score"] == 0
    assert m["precision"] is None          # TP + FP = 0: null, never 0 or 1
    assert m["f1"] == 0                    # 0 / (0 + 0 + 11)


def test_probability_exactly_half_counts_as_true():
    m = metrics(noul(1, 1.0, 0.5) + noul(1, 0.0, 0.5, start=1))
    assert (m["true_positive"], m["false_positive"], m["true_negative"], m["false_negative"]) == (1, 1, 0, 0)
    assert m["balanced_accuracy"] == 0.5 and m["baseline_adjusted_score"] == 0
    just_below = metrics(noul(1, 1.0, 0.4999999) + noul(1, 0.0, 0.4999999, start=1))
    assert just_below["false_negative"] == 1 and just_below["true_negative"] == 1


def test_soft_targets_use_target_masses():
    # t(true) = .25 predicted .2 (false side), t(true) = .75 predicted .8 (true side)
    m = metrics(noul(1, 0.25, 0.2) + noul(1, 0.75, 0.8, start=1))
    assert m["true_positive"] == pytest.approx(0.75) and m["false_positive"] == pytest.approx(0.25)
    assert m["false_negative"] == pytest.approx(0.25) and m["true_negative"] == pytest.approx(0.75)
    assert m["accuracy"] == pytest.approx(0.75) and m["balanced_accuracy"] == pytest.approx(0.75)
    assert m["baseline_adjusted_score"] == pytest.approx(0.5)
    assert m["binary_brier"] == pytest.approx(0.0025)            # single-probability Brier, not 2x
    assert m["constant_brier_baseline"] == pytest.approx(0.0625)  # pi = .5, (.25)^2
    assert m["brier_skill"] == pytest.approx(0.96)


def test_fp_and_tn_use_the_targets_own_false_entry():
    from decision_pipeline.bench.s1mb import Decision, Prediction
    # t(false) = 0.300004 is within the 1e-5 sum tolerance but is not 1 - t(true).
    d = [Decision("a", "q", ("false", "true"), {"false": 0.300004, "true": 0.7}),
         Decision("b", "q", ("true", "false"), {"false": 0.9, "true": 0.1})]
    p = [Prediction("a", "q", {"false": 0.1, "true": 0.9}), Prediction("b", "q", {"true": 0.2, "false": 0.8})]
    m = score_decisions("noul", d, p)
    assert m["false_positive"] == 0.300004
    assert m["true_negative"] == 0.9 and m["true_positive"] == 0.7 and m["false_negative"] == 0.1


def test_single_class_targets_give_null_recall_ba_and_skill():
    m = metrics(noul(3, 0.0, 0.0))
    assert m["accuracy"] == 1
    assert m["positive_recall"] is None and m["balanced_accuracy"] is None
    assert m["baseline_adjusted_skill"] is None and m["baseline_adjusted_score"] is None
    assert m["constant_brier_baseline"] == 0 and m["brier_skill"] is None  # B0 <= eps
    assert m["positive_prevalence"] == 0 and m["majority_accuracy_baseline"] == 1


def test_skill_can_be_very_negative_and_score_is_clipped():
    m = metrics(noul(5, 1.0, 0.0) + noul(5, 0.0, 1.0, start=5))  # always wrong
    assert m["balanced_accuracy"] == 0
    assert m["baseline_adjusted_skill"] == -1 and m["baseline_adjusted_score"] == 0


def test_partial_run_baselines_over_all_decisions_model_metrics_over_successes():
    pairs = noul(2, 1.0, 0.9) + noul(2, 0.0, 0.1, start=2) + noul(4, 1.0, None, start=4)
    m = metrics(pairs)
    assert m["positive_prevalence"] == pytest.approx(6 / 8)        # D: 6 of 8 true
    assert m["constant_brier_baseline"] == pytest.approx(0.75 * 0.25)
    assert m["accuracy"] == 1                                      # R: 4 successes, all right
    assert m["binary_brier"] == pytest.approx(0.01)
    assert m["true_positive"] == 2 and m["true_negative"] == 2


def test_no_successful_predictions_gives_nulls_but_baselines():
    m = metrics(noul(2, 1.0, None) + noul(2, 0.0, None, start=2))
    for key in ("binary_brier", "accuracy", "positive_recall", "specificity", "precision",
                "balanced_accuracy", "f1", "brier_skill", "baseline_adjusted_skill", "baseline_adjusted_score"):
        assert m[key] is None, key
    assert m["positive_prevalence"] == 0.5 and m["constant_brier_baseline"] == 0.25
    assert m["true_positive"] == 0 and m["true_negative"] == 0
