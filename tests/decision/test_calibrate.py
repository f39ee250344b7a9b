import numpy as np

from stages.calibrate import cross_fitted_gain, fit_and_report


def _data(temperature: float, n: int = 400, k: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = [rng.normal(0, 3, k) for _ in range(n)]
    gold = [int(rng.choice(k, p=np.exp(lg / temperature) / np.exp(lg / temperature).sum())) for lg in logits]
    return logits, gold


def test_cross_fitting_keeps_a_real_temperature_and_drops_noise():
    logits, gold = _data(temperature=3.0)  # logits 3x over-confident: a real, identifiable temperature
    assert cross_fitted_gain(logits, gold, [i % 2 for i in range(len(gold))]) > 0.05
    logits, gold = _data(temperature=1.0)  # already calibrated: fitting only fits noise
    assert cross_fitted_gain(logits, gold, [i % 2 for i in range(len(gold))]) < 0.01


def test_fit_and_report_uses_one_where_the_gain_is_not_real():
    logits, gold = _data(temperature=3.0, n=300)
    qs = [{"id": f"q{i}", "task": "choice", "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
           "gold": "abc"[g]} for i, g in enumerate(gold)]
    out = fit_and_report(logits, qs, n_bins=10)
    assert out["temperatures"]["choice"] > 2.0 and out["cross_fitted_gain"]["choice"] > 0
    assert out["after"]["nll"] < out["before"]["nll"]
    strict = fit_and_report(logits, qs, n_bins=10, min_gain=10.0)
    assert strict["temperatures"]["choice"] == 1.0 and strict["after"] == strict["before"]
