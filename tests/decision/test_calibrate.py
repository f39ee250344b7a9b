import numpy as np

from decision_pipeline.decision.calibration import fit_and_report, resplit_study, significant_temperatures


def _questions(temperature: float, n: int = 300, seed: int = 0, task: str = "choice"):
    rng = np.random.default_rng(seed)
    logits = [rng.normal(0, 3, 3) for _ in range(n)]
    gold = [int(rng.choice(3, p=np.exp(lg / temperature) / np.exp(lg / temperature).sum())) for lg in logits]
    qs = [{"id": f"{task}{i}", "task": task, "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
           "gold": "abc"[g]} for i, g in enumerate(gold)]
    return logits, qs


def test_a_real_temperature_is_kept_and_lowers_nll():
    logits, qs = _questions(temperature=3.0)  # logits 3x over-confident
    out = fit_and_report(logits, qs, n_bins=10)
    assert out["temperatures"]["choice"] == out["fitted"]["choice"] > 2.0
    assert out["p_value"]["choice"] < 0.05
    assert out["after"]["nll"] < out["before"]["nll"] and out["after"]["ece"] < out["before"]["ece"]


def test_a_noise_temperature_stays_at_one_per_task():
    over_logits, over_qs = _questions(temperature=3.0, task="choice")
    cal_logits, cal_qs = _questions(temperature=1.0, seed=1, task="score")  # already calibrated
    kept, fitted, p, bounds = significant_temperatures(over_logits + cal_logits, over_qs + cal_qs, alpha=0.05)
    assert kept["choice"] > 2.0 and kept["score"] == 1.0
    assert fitted["score"] != 1.0 and p["score"] >= 0.05  # a fit exists, the test rejects it
    assert bounds == {}
    strict = fit_and_report(over_logits, over_qs, n_bins=10, alpha=0.0)
    assert strict["temperatures"]["choice"] == 1.0 and strict["after"] == strict["before"]


def test_resplit_study_shows_always_fit_hurts_a_calibrated_readout():
    logits, qs = _questions(temperature=1.0, n=400, seed=2)
    out = resplit_study(logits, qs, n_bins=10, alpha=0.05, n_splits=30, seed=0)
    assert out["n_splits"] == 30
    # fitting on noise moves ECE/NLL up more than the tested rule, which mostly keeps T = 1
    assert out["always_fit"]["nll_change_mean"] > 0
    assert out["tested"]["ece_worse_share"] <= out["always_fit"]["ece_worse_share"]
    tested = out["tested"]
    assert tested["ece_better_share"] + tested["ece_unchanged_share"] + tested["ece_worse_share"] == 1.0
    assert tested["ece_unchanged_share"] > 0.5  # mostly T = 1 kept: nothing changes
    spread = out["tested_minus_always_fit"]["ece"]
    assert spread["p2_5"] <= spread["mean"] <= spread["p97_5"]
    assert abs(out["tested"]["nll_change_mean"]) <= out["always_fit"]["nll_change_mean"]
    assert resplit_study(logits, qs, 10, 0.05, n_splits=0, seed=0) is None


def test_resplit_study_shows_a_real_temperature_helps():
    logits, qs = _questions(temperature=3.0, n=400, seed=3)
    out = resplit_study(logits, qs, n_bins=10, alpha=0.05, n_splits=10, seed=0)
    assert out["tested"]["nll_change_mean"] < -0.05 and out["tested"]["ece_worse_share"] == 0.0


def test_empty_input_reports_nothing():
    assert fit_and_report([], [], n_bins=10)["after"] is None


def test_temperature_at_a_bound_is_flagged_and_never_sharpened_to_the_limit():
    rng = np.random.default_rng(4)
    # every item right with a clear margin: NLL keeps falling as T -> 0, the fit hits the lower bound
    right = [np.array([2.0, 0.0, 0.0]) + rng.normal(0, 0.1, 3) for _ in range(60)]
    qs = [{"id": f"r{i}", "task": "noul", "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "gold": "a"}
          for i in range(60)]
    # logits with no information about the gold: the fit hits the upper bound (uniform)
    noise = [rng.normal(0, 3, 3) for _ in range(300)]
    noise_qs = [{"id": f"n{i}", "task": "choice", "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
                 "gold": "abc"[int(rng.integers(3))]} for i in range(300)]
    kept, fitted, p, bounds = significant_temperatures(right + noise, qs + noise_qs, alpha=0.05)
    assert bounds == {"noul": "lower", "choice": "upper"}
    assert fitted["noul"] < 0.06 and kept["noul"] == 1.0
    assert kept["choice"] == fitted["choice"] > 19 and p["choice"] < 0.05
