"""Tests for decision_pipeline.common.stats: hand-checked numbers plus a few seeded properties."""
from __future__ import annotations

import math

import numpy as np
import pytest

from decision_pipeline.common.stats import (
    accuracy,
    auroc,
    bootstrap_ci,
    brier,
    cohen_kappa,
    ece,
    ece_noise_floor,
    fit_temperature,
    fit_temperatures_by_group,
    margin,
    nll,
    paired_bootstrap_diff,
    reliability_bins,
    softmax_with_temperature,
    temperature_lr_test,
)

LN3 = math.log(3.0)


def _sample_gold(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """Draw one class index per row from row-wise probabilities."""
    u = rng.random(probs.shape[0])[:, None]
    return np.minimum((u > np.cumsum(probs, axis=1)).sum(axis=1), probs.shape[1] - 1)


# ------------------------------------------------------------------ accuracy
def test_accuracy_hand_checked():
    # matches at positions 0 and 2 -> 2/4
    assert accuracy([1, 0, 2, 2], [1, 1, 2, 0]) == 0.5
    assert accuracy(["a", "b"], ["a", "b"]) == 1.0


# ----------------------------------------------------------------------- nll
def test_nll_known_probabilities():
    # (-ln 0.5 - ln 0.75) / 2 = (0.693147 + 0.287682) / 2 = 0.490415
    got = nll(np.array([[0.5, 0.5], [0.25, 0.75]]), [0, 1])
    assert got == pytest.approx(0.4904146, abs=1e-6)


def test_nll_clips_zero_probability():
    # p(gold) = 0 is clipped to 1e-12 -> -ln(1e-12) = 27.631021
    assert nll([[1.0, 0.0]], [1]) == pytest.approx(27.6310211, abs=1e-6)


def test_nll_ragged_rows():
    # row 0: p=0.5, row 1: p=0.5 (3 options) -> mean = ln 2
    assert nll([np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])], [1, 2]) == pytest.approx(math.log(2))


def test_nll_rejects_gold_out_of_row_range():
    # gold index 2 exists in the padded matrix but not in the 2-option row
    with pytest.raises(ValueError, match="out of range"):
        nll([[0.5, 0.5], [0.2, 0.3, 0.5]], [2, 0])


# --------------------------------------------------------------------- brier
def test_brier_known_row():
    # (0.7-1)^2 + 0.2^2 + 0.1^2 = 0.09 + 0.04 + 0.01 = 0.14 (not divided by K)
    assert brier([[0.7, 0.2, 0.1]], [0]) == pytest.approx(0.14)


def test_brier_ragged_and_extremes():
    # row 0 = 0.14 as above; row 1: 0.5^2 + 0.5^2 = 0.5 -> mean 0.32
    assert brier([[0.7, 0.2, 0.1], [0.5, 0.5]], [0, 1]) == pytest.approx(0.32)
    assert brier([[0.0, 1.0]], [1]) == 0.0  # perfect
    assert brier([[1.0, 0.0, 0.0]], [2]) == pytest.approx(2.0)  # confidently wrong: 1 + 1


# -------------------------------------------------------------------- margin
def test_margin_hand_checked():
    # 0.6-0.3, 0.5-0.3
    np.testing.assert_allclose(margin(np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3]])), [0.3, 0.2])


def test_margin_ragged_including_single_option():
    # tie -> 0; 0.7-0.2 = 0.5; single option -> its prob (runner-up counts as 0)
    np.testing.assert_allclose(margin([[0.5, 0.5], [0.7, 0.1, 0.2], [1.0]]), [0.0, 0.5, 1.0])
    # every row single-option (width-1 matrix): margin is the probability itself
    np.testing.assert_allclose(margin(np.array([[1.0], [0.8]])), [1.0, 0.8])


# ----------------------------------------------------------------------- ece
def test_ece_four_samples_two_bins():
    # bin [0.5,1]: conf (0.9,0.8) mean 0.85, acc 1/2 -> gap 0.35
    # bin [0,0.5): conf (0.3,0.2) mean 0.25, acc 1/2 -> gap 0.25
    # ECE = 0.5*0.35 + 0.5*0.25 = 0.30
    assert ece([0.9, 0.8, 0.3, 0.2], [1, 0, 0, 1], n_bins=2) == pytest.approx(0.30)


def test_ece_weights_bins_by_count():
    # bin 1: 3 items, conf 0.9, acc 2/3 -> gap 0.2333; bin 0: 1 item, conf 0.1, acc 0 -> gap 0.1
    # weighted 0.75*0.23333 + 0.25*0.1 = 0.2  (an unweighted bin mean would be 0.1667)
    assert ece([0.9, 0.9, 0.9, 0.1], [1, 1, 0, 0], n_bins=2) == pytest.approx(0.2)


def test_ece_ten_bins_one_item_each():
    # gaps |1-.95|=.05, |0-.85|=.85, |0-.15|=.15, |1-.55|=.45 -> 1.5/4 = 0.375
    assert ece([0.95, 0.85, 0.15, 0.55], [1, 0, 0, 1]) == pytest.approx(0.375)


def test_reliability_bins_edges_and_boundaries():
    # 0.0 -> first bin, 1.0 -> last bin, 0.5 with two bins -> upper bin [0.5, 1]
    rb = reliability_bins([0.0, 1.0, 0.3, 0.5], [0, 1, 1, 0], n_bins=2)
    np.testing.assert_array_equal(rb.count, [2, 2])
    np.testing.assert_allclose(rb.mean_confidence, [0.15, 0.75])
    np.testing.assert_allclose(rb.accuracy, [0.5, 0.5])
    np.testing.assert_allclose(rb.edges, [0.0, 0.5, 1.0])
    rb10 = reliability_bins([0.0, 1.0], [0, 1], n_bins=10)
    assert rb10.count[0] == 1 and rb10.count[9] == 1 and rb10.count.sum() == 2
    d = rb10.to_dict()
    assert d["accuracy"][0] == 0.0 and d["accuracy"][9] == 1.0 and d["accuracy"][5] is None
    assert ece([0.0, 1.0], [0, 1]) == 0.0


def test_reliability_rejects_out_of_range_confidence():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        reliability_bins([1.2, 0.5], [1, 0])


# --------------------------------------------------------------------- auroc
def test_auroc_classic_example():
    # pos {0.35, 0.8} vs neg {0.1, 0.4}: 0.35>0.1, 0.35<0.4, 0.8>both -> 3/4
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)


def test_auroc_with_ties():
    # pos {0.5, 0.9} vs neg {0.5, 0.2}: tie counts 1/2 -> (0.5 + 1 + 1 + 1)/4 = 0.875
    # ranks: 0.2->1, 0.5,0.5->2.5, 0.9->4; (2.5+4 - 3)/(2*2) = 0.875
    assert auroc([0.5, 0.5, 0.2, 0.9], [1, 0, 0, 1]) == pytest.approx(0.875)
    assert auroc([0.3, 0.3, 0.3], [1, 0, 1]) == pytest.approx(0.5)  # all tied


def test_auroc_inverted_and_single_class():
    assert auroc([0.9, 0.8, 0.1], [0, 0, 1]) == 0.0
    assert auroc([0.9, 0.8, 0.1], [True, True, True]) is None
    assert auroc([0.9, 0.8], [0, 0]) is None


# --------------------------------------------------------------------- kappa
def test_cohen_kappa_classic_2x2():
    # table (A rows, B cols): yes/yes 20, yes/no 5, no/yes 10, no/no 15; n = 50
    # po = 35/50 = 0.7; A yes 25/50, B yes 30/50 -> pe = .5*.6 + .5*.4 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_kappa_chance_and_perfect():
    # po = 0.5, pe = 0.5*0.5 + 0.5*0.5 = 0.5 -> 0
    assert cohen_kappa([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.0)
    assert cohen_kappa([0, 1, 2, 1], [0, 1, 2, 1]) == pytest.approx(1.0)


def test_cohen_kappa_single_category_is_one():
    # pe = 1 and po = 1: formula is 0/0, defined as 1.0
    assert cohen_kappa(["x", "x", "x"], ["x", "x", "x"]) == 1.0


def test_cohen_kappa_labels_argument():
    # an unused extra category changes neither po nor pe
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b, labels=["y", "n", "maybe"]) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="not in labels"):
        cohen_kappa(["y", "z"], ["y", "y"], labels=["y", "n"])


# ------------------------------------------------------------------- softmax
def test_softmax_known_values_and_temperature():
    # exp(ln3)/(1+3) = 0.75
    np.testing.assert_allclose(softmax_with_temperature(np.array([0.0, LN3]), 1.0), [0.25, 0.75])
    # dividing logits by T=2 undoes doubling them
    np.testing.assert_allclose(softmax_with_temperature(np.array([[0.0, 2 * LN3]]), 2.0), [[0.25, 0.75]])


def test_softmax_is_stable_for_huge_logits():
    out = softmax_with_temperature(np.array([1000.0, 1000.0 + LN3]), 1.0)
    np.testing.assert_allclose(out, [0.25, 0.75])


def test_softmax_ragged_returns_list():
    out = softmax_with_temperature([[0.0, LN3], [5.0, 5.0, 5.0]], 1.0)
    assert isinstance(out, list) and [r.shape for r in out] == [(2,), (3,)]
    np.testing.assert_allclose(out[0], [0.25, 0.75])
    np.testing.assert_allclose(out[1], [1 / 3] * 3)


@pytest.mark.parametrize("T", [0.0, -1.0, float("inf"), float("nan")])
def test_softmax_rejects_bad_temperature(T):
    with pytest.raises(ValueError, match="temperature"):
        softmax_with_temperature(np.array([0.0, 1.0]), T)


# --------------------------------------------------------------- temperature
def test_fit_temperature_recovers_known_temperature():
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 3.0, size=(10_000, 4))
    gold = _sample_gold(rng, softmax_with_temperature(logits, 2.0))
    assert fit_temperature(logits, gold) == pytest.approx(2.0, abs=0.1)


def test_fit_temperature_ragged_recovers_known_temperature():
    rng = np.random.default_rng(1)
    logits, gold = [], []
    for i in range(6000):
        z = rng.normal(0.0, 3.0, size=2 + i % 4)  # 2..5 options
        p = softmax_with_temperature(z, 2.0)
        logits.append(z)
        gold.append(int(rng.choice(z.size, p=p)))
    assert fit_temperature(logits, gold) == pytest.approx(2.0, abs=0.15)


def test_fit_temperature_lowers_nll_of_overconfident_logits():
    rng = np.random.default_rng(2)
    base = rng.normal(0.0, 1.0, size=(2000, 3))
    gold = _sample_gold(rng, softmax_with_temperature(base, 1.0))
    over = 5.0 * base  # same ranking, far too confident
    T = fit_temperature(over, gold)
    assert T > 3.0  # roughly undoes the x5
    nll_t1 = nll(softmax_with_temperature(over, 1.0), gold)
    nll_fit = nll(softmax_with_temperature(over, T), gold)
    assert nll_fit < nll_t1 - 0.1


def test_fit_temperature_is_deterministic_and_bounded():
    logits = np.array([[3.0, 0.0], [0.0, 3.0]])
    assert fit_temperature(logits, [0, 1]) == fit_temperature(logits, [0, 1])
    # always right -> NLL keeps falling as T shrinks, so the fit sits at the lower bound
    assert fit_temperature(logits, [0, 1]) == pytest.approx(0.05, rel=1e-5)


def test_fit_temperatures_by_group():
    rng = np.random.default_rng(3)
    logits = rng.normal(0.0, 3.0, size=(8000, 4))
    groups = np.where(np.arange(8000) % 2 == 0, "mcq", "tf")
    true_t = np.where(groups == "mcq", 1.0, 3.0)
    gold = _sample_gold(rng, softmax_with_temperature(logits / true_t[:, None], 1.0))
    fitted = fit_temperatures_by_group(list(logits), gold, list(groups))
    assert list(fitted) == ["mcq", "tf"]
    assert fitted["mcq"] == pytest.approx(1.0, abs=0.1)
    assert fitted["tf"] == pytest.approx(3.0, abs=0.3)
    mask = groups == "tf"
    assert fitted["tf"] == fit_temperature(logits[mask], gold[mask])


# ----------------------------------------------------------------- bootstrap
def test_bootstrap_deterministic_and_contains_point():
    values = np.random.default_rng(4).normal(10.0, 2.0, size=200)
    r1 = bootstrap_ci(values, seed=7)
    r2 = bootstrap_ci(values, seed=7)
    assert r1 == r2
    point, low, high = r1
    assert point == pytest.approx(values.mean())
    assert low < point < high
    assert bootstrap_ci(values, seed=8) != r1


def test_bootstrap_ignores_global_random_state():
    values = np.arange(50.0)
    np.random.seed(1)
    r1 = bootstrap_ci(values)
    np.random.seed(2)
    r2 = bootstrap_ci(values)
    assert r1 == r2  # result does not depend on the global seed
    np.random.seed(3)
    bootstrap_ci(values)
    after_call = np.random.random()
    np.random.seed(3)
    assert after_call == np.random.random()  # and the global stream was not consumed


def test_bootstrap_degenerate_and_custom_stat():
    assert bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0, 3.0)
    assert bootstrap_ci([5.0]) == (5.0, 5.0, 5.0)
    # a non-axis-aware stat goes through the generic path
    point, low, high = bootstrap_ci(np.arange(20.0), stat=lambda v: float(np.max(v)))
    assert point == 19.0 and low <= high <= 19.0


def test_bootstrap_interval_narrows_with_lower_confidence():
    values = np.random.default_rng(5).normal(size=100)
    _, lo95, hi95 = bootstrap_ci(values, confidence=0.95)
    _, lo50, hi50 = bootstrap_ci(values, confidence=0.50)
    assert lo95 < lo50 < hi50 < hi95


def test_paired_bootstrap_identical_is_zero():
    a = np.random.default_rng(6).normal(size=100)
    assert paired_bootstrap_diff(a, a.copy()) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_clear_shift_excludes_zero():
    rng = np.random.default_rng(7)
    b = rng.normal(0.0, 1.0, size=200)
    a = b + 1.0 + rng.normal(0.0, 0.1, size=200)
    diff, low, high = paired_bootstrap_diff(a, b)
    assert diff == pytest.approx(np.mean(a) - np.mean(b))
    assert 0.0 < low < diff < high


def test_paired_bootstrap_uses_same_indices():
    # a = b + 0.1 exactly; huge between-item variance would swamp 0.1 if a and b
    # were resampled independently, but pairing makes every resample's diff 0.1
    b = np.random.default_rng(8).normal(0.0, 10.0, size=100)
    diff, low, high = paired_bootstrap_diff(b + 0.1, b)
    assert diff == pytest.approx(0.1)
    assert low == pytest.approx(0.1, abs=1e-9) and high == pytest.approx(0.1, abs=1e-9)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "call",
    [
        lambda: accuracy([1, 2, 3], [1, 2]),
        lambda: nll([[0.5, 0.5], [0.5, 0.5]], [0]),
        lambda: brier([[0.5, 0.5]], [0, 1]),
        lambda: ece([0.5, 0.6], [1]),
        lambda: reliability_bins([0.5], [1, 0]),
        lambda: auroc([0.1, 0.2, 0.3], [0, 1]),
        lambda: cohen_kappa(["a", "b"], ["a"]),
        lambda: fit_temperature(np.zeros((3, 2)), [0, 1]),
        lambda: fit_temperatures_by_group(np.zeros((3, 2)), [0, 1, 0], ["g", "g"]),
        lambda: paired_bootstrap_diff([1.0, 2.0], [1.0]),
    ],
)
def test_length_mismatch_raises_one_line_value_error(call):
    with pytest.raises(ValueError, match="length mismatch") as exc:
        call()
    assert "\n" not in str(exc.value)


def test_empty_input_raises():
    with pytest.raises(ValueError, match="empty"):
        accuracy([], [])
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])


def test_temperature_lr_test_separates_real_from_noise_temperatures():
    rng = np.random.default_rng(5)
    logits = rng.normal(0.0, 3.0, size=(400, 3))
    over = _sample_gold(rng, softmax_with_temperature(logits, 3.0))  # logits 3x over-confident
    assert temperature_lr_test(logits, over, fit_temperature(logits, over)) < 1e-6
    calibrated = _sample_gold(rng, softmax_with_temperature(logits, 1.0))
    assert temperature_lr_test(logits, calibrated, fit_temperature(logits, calibrated)) > 0.05
    assert temperature_lr_test(logits, calibrated, 1.0) == pytest.approx(1.0)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="temperature"):
            temperature_lr_test(logits, calibrated, bad)


def test_temperature_lr_test_deviance_by_hand():
    # two items, two options, logits (1, 0), gold 0 then 1: NLL(T) = mean(log(1+e^{-1/T}), log(1+e^{1/T}))
    logits, gold, T = np.array([[1.0, 0.0], [1.0, 0.0]]), [0, 1], 2.0
    nll1 = (math.log1p(math.exp(-1)) + math.log1p(math.exp(1))) / 2
    nll2 = (math.log1p(math.exp(-0.5)) + math.log1p(math.exp(0.5))) / 2
    expected = math.erfc(math.sqrt(2 * 2 * (nll1 - nll2) / 2))
    assert temperature_lr_test(logits, gold, T) == pytest.approx(expected)


def test_ece_noise_floor_is_what_a_calibrated_model_shows():
    rng = np.random.default_rng(6)
    conf = rng.uniform(0.34, 1.0, 500)
    floor = ece_noise_floor(conf, n_bins=10, draws=300, seed=1)
    observed = [ece(conf, rng.random(conf.size) < conf, 10) for _ in range(300)]
    assert floor["mean"] == pytest.approx(np.mean(observed), rel=0.15)
    assert floor["mean"] < floor["p95"] < 0.1
    # the floor shrinks with more items and a mis-calibrated model sits far above it
    assert ece_noise_floor(np.tile(conf, 20), 10, 100, 1)["mean"] < floor["mean"] / 3
    assert ece(conf, rng.random(conf.size) < conf - 0.3, 10) > floor["p95"]
    with pytest.raises(ValueError):
        ece_noise_floor([], 10)
