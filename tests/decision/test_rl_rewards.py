"""Each reward on hand-written completions, the registry, and the checks on a reward's output."""
from __future__ import annotations

import math

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.rl.config import RewardParams
from decision_pipeline.decision.rl.rewards import (checked, closed_chains, correctness, format_reward, length,
                                                   make_reward_funcs, unfinished)

CLOSE = 7  # the `</think>` token id in these hand-made id lists
HARD = [0.0, 1.0, 0.0]          # gold B
SOFT = [0.1, 0.8, 0.1, 0.0]     # gold B, A and C defensible, D not


def params(**over) -> RewardParams:
    base = dict(right=1.0, wrong=-1.0, defensible=0.2, defensible_min=0.1, unfinished=-1.5, length_target=4,
                length_per_token=0.1, length_max_penalty=0.5, format_bonus=0.1)
    return RewardParams(**{**base, **over})


def test_correctness_hard_targets():
    texts = ["count them.\n</think>\nAnswer: B", "</think>\nAnswer: A", "</think>\nno letter", "Answer: B"]
    got = correctness(texts, closed=[True, True, True, False], gold_index=[1, 1, 1, 1], target=[HARD] * 4)
    assert got == [1.0, -1.0, -1.0, None]  # unparsable is wrong; unfinished is left to `unfinished`


def test_correctness_soft_targets_reward_a_defensible_answer():
    texts = ["</think>\nAnswer: B", "</think>\nAnswer: A", "</think>\nAnswer: C", "</think>\nAnswer: D"]
    got = correctness(texts, closed=[True] * 4, gold_index=[1] * 4, target=[SOFT] * 4, defensible=0.2,
                      defensible_min=0.1)
    assert got == [1.0, 0.2, 0.2, -1.0]
    # the same non-gold answer on a hard question is simply wrong
    assert correctness(["</think>\nAnswer: A"], [True], [1], [HARD]) == [-1.0]


def test_correctness_reads_the_answer_after_the_last_close():
    text = "Answer: B is tempting\n</think>\nAnswer: C"
    assert correctness([text], [True], [1], [HARD]) == [-1.0]


def test_unfinished_penalises_open_chains_only():
    assert unfinished(closed=[False, True, False], penalty=-1.5) == [-1.5, 0.0, -1.5]


def test_length_penalty_starts_above_the_target_and_is_capped():
    ids = [[1] * 3, [1] * 4, [1] * 6, [1] * 40]
    assert length(ids, target_tokens=4, per_token=0.1, max_penalty=0.5) == [-0.0, -0.0, pytest.approx(-0.2), -0.5]


def test_format_bonus_needs_a_closed_chain_ending_in_the_answer():
    texts = ["x</think>\nAnswer: C", "x</think>\nAnswer: C and more", "x\nAnswer: C"]
    assert format_reward(texts, closed=[True, True, False], bonus=0.1) == [0.1, 0.0, 0.0]


def test_closed_is_read_from_the_exact_ids():
    assert closed_chains([[1, 2, CLOSE, 3], [1, 2, 3]], CLOSE) == [True, False]


def test_registry_functions_have_trl_signature_and_names():
    funcs, weights = make_reward_funcs({"correctness": 1.0, "unfinished": 1.0, "length": 0.5, "format": 1.0},
                                       params(), CLOSE)
    assert [f.__name__ for f in funcs] == ["correctness", "unfinished", "length", "format"]
    assert weights == [1.0, 1.0, 0.5, 1.0]
    kwargs = dict(prompts=["p", "p"], completions=["a</think>\nAnswer: B", "a b c"],
                  completion_ids=[[1, CLOSE, 2], [1, 2, 3, 4, 5, 6]], gold_index=[1, 1], target=[HARD, HARD],
                  trainer_state=None, log_extra=None, log_metric=None, question_id=["q", "q"])
    out = {f.__name__: f(**kwargs) for f in funcs}
    assert out["correctness"] == [1.0, None]
    assert out["unfinished"] == [0.0, -1.5]
    assert out["length"] == [-0.0, pytest.approx(-0.2)]
    assert out["format"] == [0.1, 0.0]


def test_unknown_reward_name_is_a_clear_error():
    with pytest.raises(PipelineError, match=r"rl.rewards.corectness: unknown reward; known rewards are correctness"):
        make_reward_funcs({"corectness": 1.0}, params(), CLOSE)


@pytest.mark.parametrize("values, message", [([1.0], r"reward 'bad' returned 1 values for 2 completions"),
                                             ([1.0, math.nan], r"reward 'bad' returned nan"),
                                             ([1.0, "x"], r"reward 'bad' returned 'x'"),
                                             (None, r"reward 'bad' returned NoneType values")])
def test_a_bad_reward_output_names_the_reward(values, message):
    funcs, _ = make_reward_funcs({"bad": 1.0}, params(), CLOSE, registry={"bad": lambda **kw: values})
    with pytest.raises(PipelineError, match=message):
        funcs[0](prompts=["p", "p"], completions=["a", "b"], completion_ids=[[1], [2]])


def test_checked_passes_none_and_numbers():
    assert checked("r", [1, None, 0.5], 3) == [1.0, None, 0.5]
