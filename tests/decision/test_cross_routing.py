"""Cross-model routing on a hand-computed four-item case.

 item  readout probs (A)  gold  A ok  margin  A thinks ok  B thinks ok  B tokens
 q0    [.9 .1]            0     1     .8      1            0            10
 q1    [.4 .6]            0     0     .2      1            1            20
 q2    [.55 .45]          0     1     .1      1            0            30
 q3    [.3 .7]            0     0     .4      0            1            40

Share 0.5 routes round-half-up(0.5 * 4) = 2 items, the lowest margins: q2 (.1), q1 (.2).
A->B: q0 readout 1, q1 B 1, q2 B 0, q3 readout 0 -> accuracy 2/4 = .5, gain over A's readout
(.5) = 0, B's tokens on routed items (20 + 30) / 4 = 12.5. A->A: 1, 1, 1, 0 -> .75.
"""
import numpy as np
import pytest

from decision_pipeline.decision.evaluate import metrics
from decision_pipeline.decision.evaluate.cross_routing import all_pairs, cross_table, pair_summary

PROBS = [[.9, .1], [.4, .6], [.55, .45], [.3, .7]]


def question(qid):
    return {"id": qid, "task": "choice", "family": "A", "level": 0, "gold": "o0",
            "options": [{"id": f"o{k}", "text": f"t{k}", "value": None} for k in range(2)]}


def table(ids, thinks_ok, tokens, probs=PROBS):
    qs = [question(i) for i in ids]
    think = [0 if ok else 1 for ok in thinks_ok]
    return metrics.item_table(qs, [np.log(p) for p in probs], think, tokens, ["stop"] * len(ids), [None] * len(ids))


IDS = ["q0", "q1", "q2", "q3"]
A = table(IDS, [1, 1, 1, 0], [5, 5, 5, 5])
# B's records come in another order: rows are aligned by id, not position
B = table(IDS[::-1], [1, 0, 1, 0], [40, 30, 20, 10], probs=PROBS[::-1])


def test_cross_pair_matches_the_hand_computation():
    s = pair_summary(A, B, 0.5, n_resamples=200, seed=0)
    assert s["n_routed"] == 2
    assert s["accuracy"]["point"] == pytest.approx(0.5)
    assert s["gain_over_readout"]["diff"] == pytest.approx(0.0)
    assert s["mean_thinking_tokens"] == pytest.approx(12.5)
    assert s["readout_accuracy"] == pytest.approx(0.5)
    assert s["thinking_accuracy"] == pytest.approx(0.5)   # B thinks q1 and q3 right
    assert s["accuracy"]["ci_low"] <= 0.5 <= s["accuracy"]["ci_high"]


def test_same_model_pair_is_evaluates_own_routing():
    s = pair_summary(A, A, 0.5, n_resamples=200, seed=0)
    assert s["accuracy"]["point"] == pytest.approx(0.75)
    own = {r["fraction"]: r["accuracy"] for r in metrics.routing_curve(A)}
    assert {r["fraction"]: r["accuracy"] for r in s["curve"]} == own


def test_thinking_columns_come_from_the_other_model_by_id():
    t = cross_table(A, B)
    assert list(t["id"]) == IDS
    assert list(t["thinking_correct"]) == [False, True, False, True]
    assert list(t["chain_tokens"]) == [10, 20, 30, 40]
    assert list(t["readout_correct"]) == list(A["readout_correct"])


def test_all_ordered_pairs_including_the_reference():
    pairs = all_pairs({"a": A, "b": B}, 0.5, n_resamples=50, seed=0)
    assert list(pairs) == ["a->a", "a->b", "b->a", "b->b"]
    assert pairs["a->b"]["readout_model"] == "a" and pairs["a->b"]["thinking_model"] == "b"


def test_models_on_different_items_are_refused():
    other = table(["q0", "q1", "q2", "x9"], [1, 1, 1, 1], [1, 1, 1, 1])
    with pytest.raises(ValueError, match="x9|q3"):
        cross_table(A, other)
