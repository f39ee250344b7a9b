"""Decision Score: Brier/RPS skill against the label prior fitted on the calibration split, ECE,
item-bootstrap CIs (hand-computed)."""
import numpy as np
import pytest

from decision_pipeline.decision.evaluate import metrics as dm
from decision_pipeline.decision.evaluate.decision_score import (brier_rows, decision_score, fit_label_prior, priors_for,
                                                                rps_rows)

FLAT = {(f, 2): np.array([0.5, 0.5]) for f in ("keyword", "good", "flat")}  # a balanced calibration split


def _ds(t, cells=FLAT, **kw):
    return decision_score(t, cells, "calibration", 100, **kw)


def _table(rows, family="keyword"):
    """rows: (probs, gold index) -> the evaluate per-item table with those readout probabilities."""
    qs, logits = [], []
    for i, (p, g) in enumerate(rows):
        opts = [{"id": chr(97 + k)} for k in range(len(p))]
        fam = family[i] if isinstance(family, list) else family
        qs.append({"id": f"q{i}", "family": fam, "level": 0, "task": "choice", "gold": opts[g]["id"],
                   "options": opts})
        logits.append(np.log(np.asarray(p, dtype=float)))
    n = len(rows)
    return dm.item_table(qs, logits, [None] * n, [0] * n, ["stop"] * n, [None] * n)


def test_brier_and_rps_per_item_by_hand():
    probs = [np.array([0.8, 0.2]), np.array([0.2, 0.3, 0.5])]
    gold = np.array([0, 0])
    # Brier: 0.2²+0.2² = 0.08; 0.8²+0.3²+0.5² = 0.98
    assert brier_rows(probs, gold) == pytest.approx([0.08, 0.98])
    # RPS: (0.8-1)²/1 = 0.04; ((0.2-1)² + (0.5-1)²)/2 = 0.445
    assert rps_rows(probs, gold) == pytest.approx([0.04, 0.445])


def test_rps_charges_distance_from_gold():
    near, far = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
    assert rps_rows([near], np.array([0]))[0] < rps_rows([far], np.array([0]))[0]


def _q(family, n, gold):
    opts = [{"id": f"o{k}"} for k in range(n)]
    return {"id": f"{family}-{n}-{gold}", "family": family, "options": opts, "gold": f"o{gold}"}


def test_label_prior_is_counted_per_family_and_option_count_on_the_given_questions():
    calibration = [_q("a", 2, 0), _q("a", 2, 1), _q("a", 2, 1), _q("a", 3, 0), _q("b", 2, 0)]
    cells = fit_label_prior(calibration)
    assert set(cells) == {("a", 2), ("a", 3), ("b", 2)}
    assert cells[("a", 2)] == pytest.approx([1 / 3, 2 / 3])
    assert cells[("a", 3)] == pytest.approx([1.0, 0.0, 0.0]) and cells[("b", 2)] == pytest.approx([1.0, 0.0])
    # scored items: a cell the calibration split has takes its rate, one it lacks the uniform 1/K
    priors, fallback = priors_for(np.array(["a", "c"]), np.array([2, 4]), cells)
    assert priors[0] == pytest.approx([1 / 3, 2 / 3]) and priors[1] == pytest.approx([0.25] * 4) and fallback == 1


def test_the_prior_comes_from_the_calibration_split_not_the_scored_items():
    # calibration: keyword golds 0, 0, 0, 1 -> prior [0.75, 0.25] (the scored items alone would give [0.5, 0.5])
    calibration = [_q("keyword", 2, g) for g in (0, 0, 0, 1)]
    t = _table([([0.8, 0.2], 0), ([0.4, 0.6], 1)])
    ds = decision_score(t, fit_label_prior(calibration), "calibration", len(calibration), n_resamples=50)
    # prior Brier: (0.25² + 0.25²) = 0.125 and (0.75² + 0.75²) = 1.125, mean 0.625; the model's 0.08, 0.32 (0.2)
    # -> skill 1 - 0.2/0.625 = 0.68 (0.6 against the in-sample prior)
    assert ds["prior_brier"] == pytest.approx(0.625) and ds["brier_skill"]["point"] == pytest.approx(0.68)
    # prior RPS: 0.25² = 0.0625 and 0.75² = 0.5625, mean 0.3125; the model's 0.04, 0.16 (0.1) -> 0.68
    assert ds["prior_rps"] == pytest.approx(0.3125) and ds["rps_skill"]["point"] == pytest.approx(0.68)
    assert ds["prior"]["split"] == "calibration" and ds["prior"]["items"] == 4
    assert ds["prior"]["fallback_items"] == 0 and ds["prior"]["cells"] == {"keyword/2": [0.75, 0.25]}
    other = _table([([0.8, 0.2], 0)], family="count")  # no calibration cell: the uniform prior, counted
    assert decision_score(other, fit_label_prior(calibration), "calibration", 4, n_resamples=20)["prior"][
        "fallback_items"] == 1


def test_skill_scores_and_ece_by_hand():
    # prior (a balanced calibration split, 2 options) = [0.5, 0.5]: Brier 0.5, RPS 0.25 on each item.
    # model Brier 0.08 and 0.32 (mean 0.2) -> skill 1 - 0.2/0.5 = 0.6; RPS 0.04, 0.16 (mean 0.1) -> 0.6.
    # ECE: confidences 0.8 and 0.6, both right: 0.5·0.2 + 0.5·0.4 = 0.3.
    t = _table([([0.8, 0.2], 0), ([0.4, 0.6], 1)])
    ds = _ds(t, n_bins=10, n_resamples=200, seed=0)
    assert ds["brier_skill"]["point"] == pytest.approx(0.6)
    assert ds["rps_skill"]["point"] == pytest.approx(0.6)
    assert ds["ece"]["point"] == pytest.approx(0.3)
    assert ds["prior_brier"] == pytest.approx(0.5) and ds["brier"] == pytest.approx(0.2)
    for k in ("brier_skill", "rps_skill", "ece"):
        assert ds[k]["ci_low"] <= ds[k]["point"] <= ds[k]["ci_high"]
    assert set(ds["by_family"]) == {"keyword"}


def test_forecasting_the_prior_scores_zero_and_worse_is_negative():
    rows = [([0.5, 0.5], 0), ([0.5, 0.5], 1)]
    assert _ds(_table(rows), n_resamples=50)["brier_skill"]["point"] == pytest.approx(0.0)
    wrong = [([0.1, 0.9], 0), ([0.9, 0.1], 1)]
    assert _ds(_table(wrong), n_resamples=50)["brier_skill"]["point"] < 0


def test_per_family_scores_use_their_own_items():
    rows = [([0.9, 0.1], 0), ([0.1, 0.9], 1), ([0.5, 0.5], 0), ([0.5, 0.5], 1)]
    ds = _ds(_table(rows, ["good", "good", "flat", "flat"]), n_resamples=50)
    assert ds["by_family"]["flat"]["brier_skill"]["point"] == pytest.approx(0.0)
    # good: Brier 0.02 each vs prior 0.5 -> 1 - 0.02/0.5 = 0.96
    assert ds["by_family"]["good"]["brier_skill"]["point"] == pytest.approx(0.96)
    assert ds["by_family"]["good"]["n"] == 2


def test_bootstrap_interval_is_seeded_and_narrows_with_items():
    rng = np.random.default_rng(1)
    def rows(n):
        out = []
        for _ in range(n):
            g = int(rng.integers(0, 2))
            p = 0.7 if rng.random() < 0.8 else 0.3
            out.append(([p, 1 - p] if g == 0 else [1 - p, p], g))
        return out
    small, big = _table(rows(20)), _table(rows(400))
    a, b = _ds(small, n_resamples=300, seed=3), _ds(small, n_resamples=300, seed=3)
    assert a == b
    w = lambda d: d["brier_skill"]["ci_high"] - d["brier_skill"]["ci_low"]
    assert w(_ds(big, n_resamples=300)) < w(a)
