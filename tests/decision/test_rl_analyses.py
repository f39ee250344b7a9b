"""RL analyses: difficulty-adjusted reward trend and answer collapse, by hand."""
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.rl.analyses import (answer_collapse, collapse_last_quarter, difficulty_adjusted_trend,
                                                    probe_baseline)


def _row(q, step, answer, gold=0, closed=True):
    return {"question_id": q, "step": step, "answer": answer, "gold_index": gold, "closed": closed}


def test_adjusted_reward_subtracts_each_prompts_probe_rate():
    base = probe_baseline([{"id": "a", "correct": 2}, {"id": "b", "correct": 4}], k=4)
    assert base == {"a": 0.5, "b": 1.0}
    # round 0, prompt a: 1 of 2 chains right -> 0.5 - 0.5 = 0; round 1, prompt b: 2 of 2 right -> 1 - 1 = 0
    rows = [_row("a", 0, 0), _row("a", 0, 1), _row("b", 2, 0), _row("b", 2, 0)]
    out = difficulty_adjusted_trend(rows, base, n_resamples=20)
    assert [r["adjusted_reward"] for r in out["rounds"]] == [0.0, 0.0]
    # raw reward rose from 0.5 to 1.0, but only because prompt b is easier: no adjusted slope
    assert out["slope_per_round"]["point"] == pytest.approx(0.0)


def test_a_real_gain_gives_a_positive_slope():
    base = {f"q{i}": 0.5 for i in range(20)}
    rows = [_row(f"q{i}", i // 5, 0 if (i // 5) >= 2 else 1) for i in range(20)]  # wrong early, right late
    out = difficulty_adjusted_trend(rows, base, n_resamples=200)
    assert [r["adjusted_reward"] for r in out["rounds"]] == [-0.5, -0.5, 0.5, 0.5]
    assert out["slope_per_round"]["point"] > 0 and out["slope_per_round"]["ci_low"] > 0


def test_unclosed_chain_is_not_right_and_missing_probe_is_one_line():
    out = difficulty_adjusted_trend([_row("a", 0, 0, closed=False)], {"a": 0.25}, n_resamples=5)
    assert out["rounds"][0]["adjusted_reward"] == -0.25 and out["slope_per_round"]["point"] is None
    with pytest.raises(PipelineError, match="rollout question 'z' has no probe row"):
        difficulty_adjusted_trend([_row("z", 0, 0)], {}, n_resamples=5)


def test_answer_collapse_share_per_round():
    rows = [_row("a", 0, 0, 0), _row("b", 0, 1, 1), _row("c", 0, None, 2), _row("d", 0, 2, 0),
            _row("a", 1, 1, 0), _row("b", 1, 1, 1), _row("c", 1, 1, 2), _row("d", 1, 1, 0)]
    r0, r1 = answer_collapse(rows)
    assert r0["parsed"] == 3 and r0["top_answer_share"] == pytest.approx(1 / 3) and r0["top_gold_share"] == 0.5
    assert r1["top_answer"] == 1 and r1["top_answer_share"] == 1.0 and r1["top_gold_share"] == 0.5
    # the fair figure: of the parsed completions, how often the favourite answer is the gold one.
    # round 0: ties broken by first seen, so answer 0 (a, b, d parsed; a and d have gold 0) -> 2/3;
    # round 1: always answer 1, gold 1 only for b -> 1/4, while the largest gold share says 0.5
    assert r0["top_answer"] == 0 and r0["top_answer_gold_share"] == pytest.approx(2 / 3, abs=1e-6)
    assert r1["top_answer_gold_share"] == 0.25
    assert answer_collapse([_row("a", 0, None, 0)])[0]["top_answer_gold_share"] is None
    # answering more often vs answering better: round 0 parses 3 of 4 and gets a, b right (2/3);
    # round 1 parses all 4 and gets only b right
    assert (r0["parsed_share"], r0["right_given_parsed"]) == (0.75, pytest.approx(2 / 3, abs=1e-6))
    assert (r1["parsed_share"], r1["right_given_parsed"]) == (1.0, 0.25)


def test_collapse_over_the_last_quarter_of_rounds():
    rounds = [{"top_answer_share": a, "top_gold_share": g} for a, g in
              ((0.5, 0.5), (0.6, 0.4), (0.6, 0.5), (0.7, 0.5), (0.8, 0.5), (0.9, 0.4), (None, 0.6), (1.0, 0.5))]
    # 8 rounds: the last 2; the answer mean skips a round with no parsed answer
    assert collapse_last_quarter(rounds) == {"top_answer_share": 1.0, "top_answer_gold_share": None,
                                             "top_gold_share": 0.55, "rounds": 2}
    fair = [dict(r, top_answer_gold_share=f) for r, f in zip(rounds, (0.5, 0.4, 0.4, 0.4, 0.3, 0.2, None, 0.3))]
    assert collapse_last_quarter(fair)["top_answer_gold_share"] == 0.3
    # 9 rounds: still the last 2 (a quarter rounded down); 3 rounds: the last one
    assert collapse_last_quarter([{"top_answer_share": 0.2, "top_gold_share": 0.2}] + rounds)["rounds"] == 2
    assert collapse_last_quarter(rounds[:3]) == {"top_answer_share": 0.6, "top_answer_gold_share": None,
                                                 "top_gold_share": 0.5, "rounds": 1}
    assert collapse_last_quarter([]) == {"top_answer_share": None, "top_answer_gold_share": None,
                                         "top_gold_share": None, "rounds": 0}
