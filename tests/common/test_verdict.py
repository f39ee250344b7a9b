"""Multiplicity: Holm's adjusted p on hand-computed cases, and the family verdict that obeys it."""
import math

import pytest

from decision_pipeline.common.verdict import family_verdicts, holm, mde, n_to_detect, seed_verdict


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


def test_mde_hand_computed():
    # sd 1, n 10: (t(0.975, 9) 2.2622 + t(0.8, 9) 0.8834) / sqrt(10) = 0.9947
    assert mde(1.0, 10) == pytest.approx(0.9947, abs=1e-4)
    assert mde(1.0, 1) is None and mde(None, 10) is None
    assert mde(1.0, 10, alpha=0.05 / 13) > mde(1.0, 10)


def test_no_number_of_runs_detects_a_mean_inside_its_noise():
    # the rule's second condition (|mean| > noise) does not shrink with n, so no n is named
    assert n_to_detect(0.5, 1.0, noise=1.0) is None
    assert n_to_detect(1.5, 1.0, noise=1.0) == n_to_detect(1.5, 1.0)
    inside = seed_verdict([0.3, -0.1, 0.4, 0.0, 0.2, -0.2])    # mean 0.1, sd 0.2366: |mean| < sd
    assert inside["n_to_detect"] is None


def test_family_mde_is_the_adjusted_tests_or_the_noise():
    # per_run 1..6: mean 3.5, sd 1.8708, n 6; at alpha 0.05/2: (t(0.9875, 5) 3.1634 + t(0.8, 5) 0.9195)
    # * 1.8708 / sqrt(6) = 3.1185 > the noise 1.8708
    a = seed_verdict([1, 2, 3, 4, 5, 6])
    b = seed_verdict([0.1, 0.2, 0.1, 0.2, 0.1, 0.2])
    out = family_verdicts({"a": a, "b": b})
    assert out["a"]["mde80_family"] == pytest.approx(3.1185, abs=1e-3)
    # b: sd 0.05477, mde at 0.025 is 0.0913 > noise 0.0548
    assert out["b"]["mde80_family"] == pytest.approx(0.0913, abs=1e-3)
    # a family of one: the unadjusted mde80, or the noise where that is larger
    one = family_verdicts({"a": a})["a"]
    assert one["mde80_family"] == pytest.approx(max(a["mde80"], a["noise"]), abs=1e-4)
