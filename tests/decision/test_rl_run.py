"""The rl run's rules as functions of data: which questions train, and the analyses in its metrics."""
from __future__ import annotations

import dataclasses

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.rl.run import MIN_ROUNDS, fit_rounds, run_metrics, training_questions
from tests.decision.test_rl_memory_knobs import _params


def _p(**changes):
    return dataclasses.replace(_params(), **changes)


def test_training_questions_take_the_first_needed_in_order_or_say_what_to_change():
    p = _p()
    items = {f"q{i}": {"id": f"q{i}"} for i in range(p.prompts_needed + 3)}
    selected = [{"id": f"q{i}", "origin": "fresh"} for i in range(p.prompts_needed + 3)]
    assert [q["id"] for q in training_questions(selected, items, p, "sel.jsonl")] == \
        [f"q{i}" for i in range(p.prompts_needed)]
    with pytest.raises(PipelineError, match=r"sel.jsonl: 1 questions selected.*lower rl.max_steps"):
        training_questions(selected[:1], items, p, "sel.jsonl")
    with pytest.raises(PipelineError, match="'ghost' is not in the items file"):
        training_questions([{"id": "ghost", "origin": "sft"}] * p.prompts_needed, items, p, "sel.jsonl")


def test_a_short_selection_trains_the_whole_rounds_it_fills():
    """36 rounds of 16 planned at 2 steps per round; 540 selected fill 33 (540 // 16), so max_steps 66;
    enough questions leave the params as they are; fewer than MIN_ROUNDS rounds is one line."""
    p = _p(max_steps=72, steps_per_generation=2, prompts_per_round=16, save_steps=8)
    assert p.rounds == 36 and fit_rounds(p, 576, "sel.jsonl") is p and fit_rounds(p, 900, "sel.jsonl") is p
    short = fit_rounds(p, 540, "sel.jsonl")
    assert (short.rounds, short.max_steps, short.prompts_needed) == (33, 66, 528)
    assert dataclasses.replace(short, max_steps=72) == p  # nothing else changed
    with pytest.raises(PipelineError, match=rf"sel.jsonl: 100 questions selected fill 6 rounds .* fewer than "
                                            rf"the {MIN_ROUNDS} a run needs"):
        fit_rounds(p, 100, "sel.jsonl")


def test_run_metrics_carry_the_difficulty_adjusted_trend_and_the_collapse_check():
    p = _p(max_steps=4, steps_per_generation=2, prompts_per_round=2, num_generations=2)
    two = [{"id": "o0"}, {"id": "o1"}]
    questions = [{"id": q, "options": two, "gold": "o0"} for q in ("a", "b", "c", "d")]
    as_selected = [{**q, "options": two[::-1]} for q in questions]  # gold at B before balancing
    selected = [{"id": q["id"], "origin": o} for q, o in zip(questions, ("fresh", "sft", "fresh", "fresh"))]
    # round 0 (step 0): a, b; round 1 (step 2): c, d; every chain answers 0
    rollouts = [{"question_id": q, "step": s, "answer": 0, "gold_index": g, "closed": True, "n_tokens": 5,
                 "markers": 0, "total": 1.0 if g == 0 else -1.0, "rewards": {"correctness": 1.0 if g == 0 else -1.0}}
                for q, s, g in (("a", 0, 0), ("a", 0, 0), ("b", 0, 1), ("b", 0, 1),
                                ("c", 2, 0), ("c", 2, 0), ("d", 2, 0), ("d", 2, 0))]
    history = [{"step": s, "loss": 0.1} for s in range(1, 5)]
    probe = [{"id": q, "k": 4, "correct": c} for q, c in (("a", 2), ("b", 2), ("c", 2), ("d", 2))]
    metrics, rounds = run_metrics(rollouts, history, p, 7, selected, questions, probe, as_selected)
    assert len(rounds) == 2
    assert metrics["prompts_by_origin"] == {"fresh": 3, "sft": 1}
    trend = metrics["difficulty_adjusted_reward"]
    # per prompt: right share - probe pass rate (0.5): a 1-0.5, b 0-0.5, c 0.5, d 0.5
    assert [r["adjusted_reward"] for r in trend["rounds"]] == [0.0, 0.5]
    collapse = metrics["answer_collapse"]
    assert [c["top_answer_share"] for c in collapse] == [1.0, 1.0]
    assert [c["top_gold_share"] for c in collapse] == [0.5, 1.0]
    # the last quarter of 2 rounds is the last round
    # always answering 0: right for half of round 0's completions (b's gold is 1), all of round 1's
    assert [c["top_answer_gold_share"] for c in collapse] == [0.5, 1.0]
    assert metrics["answer_collapse_last"] == {"top_answer_share": 1.0, "top_answer_gold_share": 1.0,
                                               "top_gold_share": 1.0, "rounds": 1}
    assert metrics["gold_positions"]["mode"] == p.gold_positions
    assert metrics["gold_positions"]["as_selected"] == {"by_option_count": {"2": [0, 4]}, "top_share": 1.0}
    assert metrics["gold_positions"]["trained"]["by_option_count"] == {"2": [4, 0]}
