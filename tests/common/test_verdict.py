"""Multiplicity: Holm's adjusted p on hand-computed cases, and the family verdict that obeys it."""
import math

import pytest

from decision_pipeline.common.verdict import family_verdicts, holm, n_to_detect, seed_verdict


def test_holm_hand_computed():
    # sorted 0.01, 0.03, 0.04 (m = 3): 3 x 0.01 = 0.03; max(0.03, 2 x 0.03) = 0.06; max(0.06, 1 x 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, None, 0.001]) == pytest.approx([0.5, None, 0.002])
    assert holm([0.9, 0.8]) == [1.0, 1.0]          # capped at 1
    assert holm([]) == []


def test_seed_verdict_p_is_the_t_test():
    # diffs 1, 2, 3, 4, 5: mean 3, sd sqrt(2.5), t = 3 / (sqrt(2.5) / sqrt(5)) = 4.2426, df 4 -> p = 0.01324
    v = seed_verdict([1, 2, 3, 4, 5])
    assert v["p"] == pytest.approx(0.01324, abs=1e-5)
    assert (v["p"] < 0.05) == (v["ci_low"] > 0)    # the interval and the test agree


def test_family_verdict_flips_on_the_adjusted_p():
    strong = seed_verdict([-2.0, -1.5, -2.5, -1.8, -2.2])     # p 0.0003
    weak = seed_verdict([0.10, 0.02, 0.15, 0.05, 0.12, 0.01])  # p ~0.02: detected alone
    assert strong["detected"] and weak["detected"]
    family = {"strong": strong, "weak": weak, **{f"null{i}": seed_verdict([1, -1, 0.5, -0.5, 0.2]) for i in range(11)}}
    out = family_verdicts(family)
    assert out["strong"]["detected"] and out["strong"]["family_size"] == 13
    assert out["strong"]["p_adjusted"] == pytest.approx(13 * strong["p"], rel=1e-3)
    assert not out["weak"]["detected"] and out["weak"]["verdict"] == "not detected"
    assert "Holm-adjusted p" in out["weak"]["reason"]
    assert out["weak"]["p_adjusted"] >= 0.05 and out["weak"]["p"] < 0.05
    # alone (a family of one) the weak claim stays detected
    assert family_verdicts({"weak": weak})["weak"]["detected"]


def test_n_to_detect():
    # diff = sd: n = 10 gives (2.262 + 0.883) / sqrt(10) = 0.9946 <= 1; n = 9 gives 1.0777 > 1
    assert n_to_detect(1.0, 1.0) == 10
    assert n_to_detect(0.0, 1.0) is None and n_to_detect(None, 1.0) is None
    assert n_to_detect(1.0, 1.0, alpha=0.05 / 13) > 10
    assert n_to_detect(1.0, 0.0) == 2


def test_not_tested_has_no_p_or_n():
    v = seed_verdict([])
    assert v["p"] is None and v["n_to_detect"] is None
    assert not math.isnan(seed_verdict([1.0, 1.0])["p"])
