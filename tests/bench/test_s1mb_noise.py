"""Item-bootstrap CIs of S1MB task scores (bench/noise.py)."""
import numpy as np
import pytest

from decision_pipeline.bench.noise import Scored, task_cis
from decision_pipeline.bench.s1mb.metrics import score_decisions
from decision_pipeline.bench.s1mb.records import Decision, Prediction

OPTS = ("a", "b", "c")


def _choice(probs_of, n=30, seed=0):
    """n one-question cases with gold drawn at random; the model's probabilities from probs_of(gold, i)."""
    rng = np.random.default_rng(seed)
    decisions, preds = [], []
    for i in range(n):
        gold = OPTS[int(rng.integers(0, 3))]
        decisions.append(Decision(f"c{i}", "q", OPTS, {o: float(o == gold) for o in OPTS}))
        preds.append(Prediction(f"c{i}", "q", probs_of(gold, i)))
    return Scored("bench-choice", "choice", decisions, preds)


def _point(s):
    return score_decisions(s.task, s.decisions, s.predictions, s.benchmark)["baseline_adjusted_score"]


def test_a_perfect_model_has_a_zero_width_interval_at_one():
    s = _choice(lambda g, i: {o: float(o == g) for o in OPTS})
    out = task_cis([s], {"bench-choice": "choice"}, {"choice": _point(s)}, 50, 0)
    c = out["task_scores"]["choice"]
    assert c["point"] == pytest.approx(1.0) and c["ci_low"] == pytest.approx(1.0) == c["ci_high"]
    assert c["n_draws"] == 50


def test_an_imperfect_model_gets_an_interval_around_its_point_and_it_is_seeded():
    good = lambda g, i: ({o: (0.8 if o == g else 0.1) for o in OPTS} if i % 3 else {o: 1 / 3 for o in OPTS})
    s = _choice(good, n=60)
    point = _point(s)
    a = task_cis([s], {"bench-choice": "choice"}, {"choice": point}, 200, 1)
    assert a == task_cis([s], {"bench-choice": "choice"}, {"choice": point}, 200, 1)
    c = a["task_scores"]["choice"]
    assert c["ci_low"] < point < c["ci_high"]
    assert 0 < c["ci_high"] - c["ci_low"] < 0.6


def test_tasks_missing_from_the_category_and_the_avg_are_null_not_invented():
    s = _choice(lambda g, i: {o: float(o == g) for o in OPTS})
    out = task_cis([s], {"bench-choice": "choice"}, {"choice": 1.0, "noul": None, "score": None}, 10, 0)
    assert out["task_scores"]["noul"] == {"point": None, "ci_low": None, "ci_high": None, "n_draws": 0}
    assert out["task_avg"]["ci_low"] is None


def test_failed_predictions_are_resampled_with_their_case_not_dropped():
    s = _choice(lambda g, i: {o: float(o == g) for o in OPTS}, n=10)
    s = s._replace(predictions=s.predictions[:5] + [Prediction(f"c{i}", "q", error="timeout") for i in range(5, 10)])
    out = task_cis([s], {"bench-choice": "choice"}, {"choice": _point(s)}, 20, 0)
    # a draw of only failed cases has no score (null, left out); the rest score like the point
    c = out["task_scores"]["choice"]
    assert 15 <= c["n_draws"] <= 20 and c["point"] == _point(s)
