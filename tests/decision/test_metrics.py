"""Hand-checked examples for decision_pipeline.decision.evaluate.metrics.

The six-item fixture (probabilities chosen so every number below is computed
by hand in the comments):

 item  task    fam lvl  readout probs      gold  r_pred ok  margin  think  ok  post  tokens finish
 i0    choice  A   0    [.9 .1]            0     0      1   .8      0      1   0     10     stop
 i1    choice  A   0    [.6 .4]            1     0      0   .2      1      1   1     20     stop
 i2    choice  A   1    [.7 .3]            0     0      1   .4      None   0   None  100    length
 i3    score   B   0    [.2 .8]            1     1      1   .6      0      0   1     30     stop
 i4    score   B   0    [.45 .55]          0     1      0   .1      0      1   0     40     stop
 i5    score   B   1    [.5 .25 .25]       2     0      0   .25     2      1   None  100    length
"""
import math

import numpy as np
import pytest

from decision_pipeline.common import stats
from decision_pipeline.decision.evaluate import metrics

PROBS = [[.9, .1], [.6, .4], [.7, .3], [.2, .8], [.45, .55], [.5, .25, .25]]
GOLD = [0, 1, 0, 1, 0, 2]
THINK = [0, 1, None, 0, 0, 2]
POST = [0, 1, None, 1, 0, None]
TOKENS = [10, 20, 100, 30, 40, 100]
FINISH = ["stop", "stop", "length", "stop", "stop", "length"]
TASKS = ["choice"] * 3 + ["score"] * 3
CELLS = [("A", 0), ("A", 0), ("A", 1), ("B", 0), ("B", 0), ("B", 1)]


def question(i, n_opts, gold, task="choice", family="A", level=0, qid=None):
    opts = [{"id": f"o{k}", "text": f"t{k}", "value": None} for k in range(n_opts)]
    return {"id": qid or f"q{i}", "task": task, "family": family, "level": level,
            "options": opts, "gold": f"o{gold}"}


def onehot_logits(pred, n_opts, strength=3.0):
    z = np.zeros(n_opts)
    z[pred] = strength
    return z


@pytest.fixture()
def six():
    qs = [question(i, len(p), g, t, f, lvl) for i, (p, g, t, (f, lvl)) in enumerate(zip(PROBS, GOLD, TASKS, CELLS))]
    logits = [np.log(p) for p in PROBS]
    post = [None if p is None else onehot_logits(p, len(PROBS[i])) for i, p in enumerate(POST)]
    return metrics.item_table(qs, logits, THINK, TOKENS, FINISH, post, None, None)


def make_table(readout_ok, thinking_ok, ids=None):
    """Two-option items whose readout/thinking correctness is given (gold is option 0)."""
    n = len(readout_ok)
    ids = ids or [f"q{i}" for i in range(n)]
    qs = [question(i, 2, 0, qid=ids[i]) for i in range(n)]
    logits = [onehot_logits(0 if ok else 1, 2) for ok in readout_ok]
    think = [0 if ok else 1 for ok in thinking_ok]
    return metrics.item_table(qs, logits, think, [5] * n, ["stop"] * n, [None] * n)


# ------------------------------------------------------------------ table
def test_item_table_columns(six):
    assert six["gold"].tolist() == GOLD
    assert six["readout_pred"].tolist() == [0, 0, 0, 1, 1, 0]
    assert six["readout_correct"].tolist() == [True, False, True, True, False, False]
    np.testing.assert_allclose(six["margin"], [.8, .2, .4, .6, .1, .25], atol=1e-9)
    np.testing.assert_allclose(six["confidence"], [.9, .6, .7, .8, .55, .5], atol=1e-9)
    assert six["thinking_pred"].tolist() == [0, 1, -1, 0, 0, 2]
    assert six["thinking_correct"].tolist() == [True, True, False, False, True, True]
    assert six["parsed"].tolist() == [True, True, False, True, True, True]
    assert six["post_pred"].tolist() == [0, 1, -1, 1, 0, -1]
    assert six["post_correct"].tolist() == [True, True, False, True, True, False]
    assert six["unfinished"].tolist() == [False, False, True, False, False, True]
    assert six["task"].tolist() == TASKS and six["family"].tolist() == list("AAABBB")
    assert six["level"].tolist() == [0, 0, 1, 0, 0, 1]
    assert six["readout_probs"].shape == (6,) and six["readout_probs"][5].shape == (3,)


def test_item_table_applies_per_task_temperatures():
    qs = [question(0, 2, 0, "choice"), question(1, 2, 0, "score")]
    logits = [np.log([.9, .1])] * 2
    post = [np.log([.9, .1]), np.log([.9, .1])]
    t = metrics.item_table(qs, logits, [0, 0], [1, 1], ["stop"] * 2, post, {"choice": 2.0}, {"score": 2.0})
    # T=2 on log-probs takes square roots: sqrt(.9):sqrt(.1) = 3:1 -> [.75, .25]
    np.testing.assert_allclose(t["readout_probs"][0], [.75, .25], atol=1e-9)
    np.testing.assert_allclose(t["readout_probs"][1], [.9, .1], atol=1e-9)  # no temp for score -> T=1
    np.testing.assert_allclose(t["margin"], [.5, .8], atol=1e-9)
    np.testing.assert_allclose(t["post_confidence"], [.9, .75], atol=1e-9)
    assert t["readout_pred"].tolist() == [0, 0]  # temperature never changes the argmax


def test_item_table_rejects_bad_input():
    qs = [question(0, 2, 0), question(1, 3, 0)]
    with pytest.raises(ValueError, match="thinking_preds has 1"):
        metrics.item_table(qs, [np.zeros(2), np.zeros(3)], [0], [1, 1], ["stop"] * 2, [None] * 2)
    with pytest.raises(ValueError, match="'q1' has 3 options"):
        metrics.item_table(qs, [np.zeros(2), np.zeros(2)], [0, 0], [1, 1], ["stop"] * 2, [None] * 2)


# --------------------------------------------------------------- headline
def test_headline_hand_checked(six):
    h = metrics.headline(six)
    assert h["n"] == 6
    assert h["readout"]["accuracy"] == 0.5                     # i0 i2 i3
    assert h["thinking"]["accuracy"] == round(4 / 6, 6)        # i0 i1 i4 i5
    assert h["thinking"]["parse_rate"] == round(5 / 6, 6)
    assert h["post_chain"] == {"accuracy": round(4 / 6, 6), "coverage": round(4 / 6, 6)}
    expected_nll = -np.mean(np.log([.9, .4, .7, .8, .45, .25]))
    assert h["readout"]["nll"] == pytest.approx(expected_nll, abs=1e-6)
    expected_brier = np.mean([.02, .72, .18, .08, 2 * .55 ** 2, .25 + .0625 + .5625])
    assert h["readout"]["brier"] == pytest.approx(expected_brier, abs=1e-6)
    assert h["median_chain_tokens"] == 35.0                    # median of 10 20 30 40 100 100
    assert h["loops"] == {"rate": round(2 / 6, 6), "n": 2}


def test_headline_agreement_and_auroc(six):
    h = metrics.headline(six)
    # parsed items i0 i1 i3 i4 i5: readout 0 0 1 1 0 vs thinking 0 1 0 0 2 -> only i0 agrees
    assert h["agreement"]["readout_thinking"] == 0.2
    # parsed with post-chain i0 i1 i3 i4: letter 0 1 0 0 vs post 0 1 1 0 -> 3 of 4
    assert h["agreement"]["letter_post_chain"] == 0.75
    # the only agreeing item (i0) has the largest margin -> perfect separation
    assert h["disagreement_auroc"] == 1.0


def test_disagreement_auroc_reversed_and_undefined():
    # item 0: low margin but agrees; item 1: high margin but disagrees -> AUROC 0
    qs = [question(0, 2, 0), question(1, 2, 0)]
    t = metrics.item_table(qs, [np.log([.55, .45]), np.log([.95, .05])], [0, 1], [1, 1], ["stop"] * 2, [None] * 2)
    h = metrics.headline(t)
    assert h["disagreement_auroc"] == 0.0
    assert h["agreement"]["letter_post_chain"] is None         # no post-chain readouts at all
    same = metrics.headline(make_table([True, False], [True, False]))
    assert same["disagreement_auroc"] is None                  # every parsed item agrees: one class
    unparsed = metrics.item_table(qs, [np.zeros(2)] * 2, [None, None], [1, 1], ["length"] * 2, [None] * 2)
    hu = metrics.headline(unparsed)
    assert hu["agreement"]["readout_thinking"] is None and hu["disagreement_auroc"] is None
    assert hu["thinking"]["accuracy"] == 0.0 and hu["loops"]["rate"] == 1.0


def test_headline_by_task(six):
    by = metrics.headline(six)["by_task"]
    assert sorted(by) == ["choice", "score"]
    assert by["choice"]["readout"]["accuracy"] == round(2 / 3, 6) and by["choice"]["n"] == 3
    assert by["score"]["readout"]["accuracy"] == round(1 / 3, 6)
    assert by["choice"]["thinking"]["accuracy"] == round(2 / 3, 6)
    assert by["score"]["thinking"]["parse_rate"] == 1.0
    assert by["choice"]["post_chain"]["coverage"] == round(2 / 3, 6)


def test_reliability_matches_stats(six):
    rb = metrics.reliability(six, n_bins=5)
    assert rb["count"] == [0, 0, 2, 2, 2]                      # .5 .55 | .6 .7 | .8 .9
    assert rb["accuracy"][2] == 0.0 and rb["accuracy"][4] == 1.0
    assert rb == stats.reliability_bins(six["confidence"], six["readout_correct"], 5).to_dict()


# ---------------------------------------------------------------- routing
def test_routing_curve_hand_checked(six):
    # margin order: i4 (.1), i1 (.2), i5 (.25), i2 (.4), i3 (.6), i0 (.8)
    curve = metrics.routing_curve(six, [0.0, 0.5, 1.0])
    f0, f5, f1 = curve
    assert (f0["n_routed"], f0["accuracy"], f0["mean_thinking_tokens"]) == (0, 0.5, 0.0)
    # route i4 i1 i5 (thinking right on all three), keep readout on i2 i3 i0 (all right)
    assert (f5["n_routed"], f5["accuracy"]) == (3, 1.0)
    assert f5["mean_thinking_tokens"] == round((40 + 20 + 100) / 6, 6)
    assert (f1["n_routed"], f1["accuracy"], f1["mean_thinking_tokens"]) == (6, round(4 / 6, 6), 50.0)
    assert all(r["readout_accuracy"] == 0.5 and r["thinking_accuracy"] == round(4 / 6, 6) for r in curve)


def test_routing_curve_default_grid(six):
    curve = metrics.routing_curve(six)
    assert len(curve) == 21 and curve[0]["fraction"] == 0.0 and curve[-1]["fraction"] == 1.0
    assert [r["n_routed"] for r in curve] == sorted(r["n_routed"] for r in curve)
    tokens = [r["mean_thinking_tokens"] for r in curve]
    assert tokens == sorted(tokens)                            # cost never falls as more items think


def test_routing_ties_break_by_item_index():
    qs = [question(i, 2, 0) for i in range(3)]
    same = [np.log([.3, .7])] * 3                              # identical margins, readout always wrong
    first = metrics.item_table(qs, same, [0, 1, 1], [1, 2, 3], ["stop"] * 3, [None] * 3)
    last = metrics.item_table(qs, same, [1, 1, 0], [1, 2, 3], ["stop"] * 3, [None] * 3)
    assert metrics.routing_curve(first, [1 / 3])[0]["accuracy"] == round(1 / 3, 6)  # item 0 routed
    assert metrics.routing_curve(last, [1 / 3])[0]["accuracy"] == 0.0
    assert metrics.routing_curve(first, [1 / 3])[0]["mean_thinking_tokens"] == round(1 / 3, 6)


def test_routing_fraction_out_of_range(six):
    with pytest.raises(ValueError, match="1.5"):
        metrics.routing_curve(six, [1.5])


def test_gap_recovered_hand_checked(six):
    # f=0.3 routes round(1.8)=2 items (i4, i1): 5/6 right; gap (5/6-3/6)/(4/6-3/6) = 2
    assert metrics.gap_recovered(six, 0.3) == pytest.approx(2.0, abs=1e-5)
    # f=0.5: (1 - .5) / (2/3 - .5) = 3: routing can beat thinking everywhere (>1 is reported as is)
    assert metrics.gap_recovered(metrics.routing_curve(six), 0.5) == pytest.approx(3.0, abs=1e-4)
    assert metrics.gap_recovered(six, 1.0) == pytest.approx(1.0, abs=1e-9)
    assert metrics.gap_recovered(six, 0.0) == 0.0


def test_gap_recovered_negative_none_and_missing_row():
    # margins ascending by construction; routing the first item swaps a right readout for a wrong chain
    qs = [question(i, 2, 0) for i in range(4)]
    logits = [np.log([.55, .45]), np.log([.35, .65]), np.log([.2, .8]), np.log([.1, .9])]
    t = metrics.item_table(qs, logits, [1, 0, 0, 1], [1] * 4, ["stop"] * 4, [None] * 4)
    assert metrics.gap_recovered(t, 0.25) == -1.0              # (0 - .25) / (.5 - .25)
    assert metrics.gap_recovered(make_table([True, False], [False, True]), 0.5) is None
    # thinking 0 < readout .25 and routing costs .25: the old ratio read +1.0 ("all recovered"); no gap, so None
    worse = metrics.item_table(qs, logits, [1, 1, 1, 1], [1] * 4, ["stop"] * 4, [None] * 4)
    assert metrics.gap_recovered(worse, 0.25) is None
    with pytest.raises(ValueError, match="no row at fraction 0.33"):
        metrics.gap_recovered(metrics.routing_curve(t), 0.33)


# -------------------------------------------------------------- intervals
def test_headline_cis(six):
    ci = metrics.headline_cis(six, n_resamples=500, seed=1)
    for key, point in (("readout_accuracy", 0.5), ("thinking_accuracy", round(4 / 6, 6)),
                       ("post_chain_accuracy", round(4 / 6, 6)), ("routed_accuracy_at_0.3", round(5 / 6, 6))):
        assert ci[key]["point"] == point
        assert ci[key]["ci_low"] <= point <= ci[key]["ci_high"]
        assert ci[key]["ci_low"] < ci[key]["ci_high"]          # six mixed items: a real interval
    assert ci == metrics.headline_cis(six, n_resamples=500, seed=1)
    perfect = metrics.headline_cis(make_table([True] * 5, [True] * 5), n_resamples=100)
    assert perfect["readout_accuracy"] == {"point": 1.0, "ci_low": 1.0, "ci_high": 1.0}


def test_vs_baseline_identical_is_zero(six):
    out = metrics.vs_baseline(six, six, n_resamples=200)
    assert out["n"] == 6
    for key in ("readout_accuracy", "thinking_accuracy", "post_chain_accuracy", "unfinished_rate", "mean_chain_tokens"):
        assert {k: out[key][k] for k in ("diff", "ci_low", "ci_high")} == {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0}
        assert out[key]["model"] == out[key]["baseline"]
    assert out["paired_counts"] == {"readout": {"model_only": 0, "baseline_only": 0},
                                    "thinking": {"model_only": 0, "baseline_only": 0}}


def test_gate_reads_the_comparison(six):
    out = metrics.vs_baseline(six, six, n_resamples=200)
    g = metrics.gate(out, six, n_resamples=200)
    assert g["readout_inside_baseline_ci"] and g["thinking_not_worse"] and not g["thinking_gain_significant"]
    assert not g["unfinished_fell"] and g["unfinished_not_worse"]  # nothing fell: the model is its own baseline
    assert g["passed"]


def test_vs_baseline_clear_improvement_and_alignment():
    rng = np.random.default_rng(0)
    base_ok = rng.random(200) < 0.3
    model_ok = base_ok | (rng.random(200) < 0.6)               # fixes many items, breaks none
    ids = [f"id{i}" for i in range(200)]
    model, base = make_table(model_ok, base_ok, ids), make_table(base_ok, model_ok, ids)
    out = metrics.vs_baseline(model, base)
    d = out["readout_accuracy"]
    assert d["diff"] == pytest.approx(model_ok.mean() - base_ok.mean(), abs=1e-6)
    assert 0 < d["ci_low"] <= d["diff"] <= d["ci_high"]
    t = out["thinking_accuracy"]
    assert t["ci_high"] < 0 and t["diff"] == pytest.approx(-d["diff"], abs=1e-6)
    # the same items in another order must give the same paired comparison
    rev = [199 - i for i in range(200)]
    base_rev = make_table(base_ok[rev], model_ok[rev], [ids[i] for i in rev])
    assert metrics.vs_baseline(model, base_rev) == out


def test_vs_baseline_missing_id_raises():
    model = make_table([True, False, True], [True] * 3, ["a", "b", "c"])
    base = make_table([True, False], [True] * 2, ["a", "b"])
    with pytest.raises(ValueError, match="'c'"):
        metrics.vs_baseline(model, base)
    with pytest.raises(ValueError, match="'c'"):
        metrics.vs_baseline(base, model)
    with pytest.raises(ValueError, match="duplicate item id 'a'"):
        metrics.vs_baseline(make_table([True, True], [True, True], ["a", "a"]), base)


# -------------------------------------------------------------------- grid
def test_accuracy_grid(six):
    assert metrics.accuracy_grid(six) == [
        {"family": "A", "level": 0, "readout_accuracy": 0.5, "thinking_accuracy": 1.0, "n": 2},
        {"family": "A", "level": 1, "readout_accuracy": 1.0, "thinking_accuracy": 0.0, "n": 1},
        {"family": "B", "level": 0, "readout_accuracy": 0.5, "thinking_accuracy": 0.5, "n": 2},
        {"family": "B", "level": 1, "readout_accuracy": 0.0, "thinking_accuracy": 1.0, "n": 1},
    ]


def test_outputs_are_json_ready(six):
    import json
    blob = {"h": metrics.headline(six), "c": metrics.routing_curve(six), "g": metrics.accuracy_grid(six),
            "ci": metrics.headline_cis(six, n_resamples=50)}
    text = json.dumps(blob, allow_nan=False)                    # raises on NaN/inf or numpy scalars
    floats = [v for v in json.loads(text)["c"][0].values() if isinstance(v, float)]
    assert floats and all(v == round(v, 6) for v in floats)
    assert not math.isnan(metrics.headline(six)["readout"]["ece"])


def test_ece_change_is_zero_for_identical_tables_and_signed_otherwise():
    import numpy as np
    from decision_pipeline.decision.evaluate.metrics import ece_change
    corr = np.array([True, False, True, True, False, True, False, True] * 25)  # accuracy 0.625
    raw = {"readout_correct": corr, "confidence": np.full(200, 0.6)}
    same = ece_change(raw, raw, n_bins=10, n_resamples=50)
    assert same == {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    worse = {"readout_correct": corr, "confidence": np.full(200, 0.99)}  # confidence 0.99 at accuracy 0.625
    out = ece_change(worse, raw, n_bins=10, n_resamples=50)
    assert out["diff"] == round(abs(0.99 - 0.625) - abs(0.6 - 0.625), 6) and out["ci_low"] > 0


def test_vs_baseline_by_family_locates_the_gain():
    n = 40
    fams = ["A"] * 20 + ["B"] * 20
    qs = [question(i, 2, 0, family=fams[i]) for i in range(n)]
    base_ok = [i % 2 == 0 for i in range(n)]
    model_ok = [True if fams[i] == "A" else base_ok[i] for i in range(n)]   # gains only in family A

    def table(ok):
        return metrics.item_table(qs, [onehot_logits(0 if o else 1, 2) for o in ok], [0] * n, [5] * n,
                                  ["stop"] * n, [None] * n)
    out = metrics.vs_baseline(table(model_ok), table(base_ok), n_resamples=300)
    a, b = out["by_family"]["A"], out["by_family"]["B"]
    assert (a["n"], a["model"], a["baseline"], a["diff"]) == (20, 1.0, 0.5, 0.5) and a["ci_low"] > 0
    assert (b["diff"], b["ci_low"], b["ci_high"]) == (0.0, 0.0, 0.0)


def thinking_table(think):
    """Two-option items (gold 0) whose thinking answers are given (None: no parsed answer)."""
    n = len(think)
    qs = [question(i, 2, 0) for i in range(n)]
    return metrics.item_table(qs, [onehot_logits(0, 2)] * n, think, [5] * n, ["stop"] * n, [None] * n)


def test_thinking_change_splits_exactly_into_parse_and_right_when_answered():
    # base: 5 of 10 parsed, 3 of them right (p 0.5, r 0.6, acc 0.3); model: 9 parsed, 6 right (p 0.9, r 2/3,
    # acc 0.6). Δacc 0.3 = Δp 0.4 x r_before 0.6 (0.24) + p_after 0.9 x Δr 0.0667 (0.06)
    base = thinking_table([0, 0, 0, 1, 1, None, None, None, None, None])
    model = thinking_table([0, 0, 0, 0, 0, 0, 1, 1, 1, None])
    out = metrics.vs_baseline(model, base, n_resamples=400)
    parse, right, parts = out["thinking_parse_rate"], out["thinking_right_when_answered"], out["thinking_decomposition"]
    assert (parse["baseline"], parse["model"], parse["diff"]) == (0.5, 0.9, 0.4)
    assert parse["ci_low"] <= 0.4 <= parse["ci_high"]
    assert right["baseline"] == 0.6 and right["model"] == pytest.approx(2 / 3, abs=1e-6)
    assert right["diff"] == pytest.approx(2 / 3 - 0.6, abs=1e-6) and right["ci_low"] < right["diff"] < right["ci_high"]
    assert (right["n_baseline"], right["n_model"]) == (5, 9)
    assert parts["parse_part"] == pytest.approx(0.24) and parts["right_part"] == pytest.approx(0.06)
    assert parts["total"] == pytest.approx(0.3) == out["thinking_accuracy"]["diff"]
    assert parts["parse_part"] + parts["right_part"] == pytest.approx(parts["total"], abs=1e-6)


def test_a_side_without_parsed_answers_puts_the_whole_change_in_the_parse_part():
    base = thinking_table([None] * 10)                   # the base model's chains never parse
    model = thinking_table([0, 0, 0, 0, 0, 0, 1, 1, 1, None])
    out = metrics.vs_baseline(model, base, n_resamples=200)
    assert out["thinking_right_when_answered"]["diff"] is None and out["thinking_right_when_answered"]["baseline"] is None
    assert out["thinking_decomposition"]["parse_part"] == pytest.approx(0.6)
    assert out["thinking_decomposition"]["right_part"] == 0.0
