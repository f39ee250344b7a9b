"""Learned router vs margin routing: fixable labels, the fit, its one-line refusal, AUROC by construction."""
import numpy as np
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.evaluate import metrics as dm
from decision_pipeline.decision.evaluate.router import compare_routers, entropy, fit_router, fixable, router_scores


def _table(rows):
    """rows: (readout probs, gold, thinking pred, family, chain tokens)."""
    qs, logits, preds, tokens = [], [], [], []
    for i, (p, g, t, fam, ct) in enumerate(rows):
        opts = [{"id": chr(97 + k)} for k in range(len(p))]
        qs.append({"id": f"q{i}", "family": fam, "level": 0, "task": "choice", "gold": opts[g]["id"], "options": opts})
        logits.append(np.log(np.asarray(p, dtype=float)))
        preds.append(t)
        tokens.append(ct)
    n = len(rows)
    return dm.item_table(qs, logits, preds, tokens, ["stop"] * n, [None] * n)


def test_fixable_is_thinking_right_where_readout_wrong():
    t = _table([([0.9, 0.1], 0, 1, "a", 5),    # readout right, thinking wrong
                ([0.9, 0.1], 1, 1, "a", 5),    # readout wrong, thinking right -> fixable
                ([0.9, 0.1], 1, None, "a", 5),  # thinking unparsed
                ([0.9, 0.1], 0, 0, "a", 5)])   # both right
    assert fixable(t).tolist() == [False, True, False, False]


def test_entropy_is_normalised_by_option_count():
    t = _table([([0.5, 0.5], 0, 0, "a", 1), ([0.25] * 4, 0, 0, "a", 1), ([1 - 1e-9, 1e-9], 0, 0, "a", 1)])
    assert entropy(t) == pytest.approx([1.0, 1.0, 0.0], abs=1e-6)


def test_fewer_items_than_features_is_one_line():
    t = _table([([0.6, 0.4], 0, 1, "a", 3), ([0.6, 0.4], 1, 1, "b", 3), ([0.7, 0.3], 1, 1, "c", 3)])
    with pytest.raises(PipelineError, match=r"calibrate@m: 3 items to fit a router with 7 features") as err:
        fit_router(t, "calibrate@m")
    assert "\n" not in str(err.value)


def _world(n, seed):
    """Family 'hard' is fixable whatever the margin; elsewhere thinking repeats the readout. Margin is random."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        fam = "hard" if i % 3 == 0 else "easy"
        top = float(rng.uniform(0.5, 0.99))
        gold = 1 if fam == "hard" else 0            # readout (argmax 0) wrong on hard items
        rows.append(([top, 1 - top], gold, gold if fam == "hard" else 0, fam, 40 if fam == "hard" else 10))
    return _table(rows)


def test_learned_router_finds_fixable_items_margin_cannot():
    router = fit_router(_world(90, 0))
    assert router["n_fit"] == 90 and router["n_fixable"] == 30 and router["converged"]
    out = compare_routers(router, _world(60, 1), share=1 / 3)
    assert out["learned"]["fixable_auroc"] == pytest.approx(1.0)
    assert 0.3 < out["margin"]["fixable_auroc"] < 0.7                 # margin is unrelated here
    # routing the top third by the learned router sends exactly the 20 hard items: every answer right
    assert out["learned"]["accuracy"] == pytest.approx(1.0)
    assert out["margin"]["accuracy"] < 1.0


def test_no_router_reports_margin_only_and_unseen_family_scores():
    out = compare_routers(None, _world(30, 2))
    assert out["learned"] is None and out["margin"]["fixable_auroc"] is not None
    router = fit_router(_world(30, 3))
    t = _table([([0.6, 0.4], 0, 0, "new", 10)])
    # a family the router never saw: no family term and no chain prior, only intercept, margin and entropy
    w = router["coef"]
    z = w[0] + w[1] * 0.2 + w[2] * entropy(t)[0]
    assert router_scores(router, t)[0] == pytest.approx(1 / (1 + np.exp(-z)))
