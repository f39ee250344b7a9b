"""GRPO rewards: a registry of small pure functions with TRL's reward signature.

TRL calls every reward function by keyword with `prompts`, `completions`,
`completion_ids`, each dataset column repeated per generation, `trainer_state`,
`log_extra` and `log_metric`; each returns one float (or None: not applicable)
per completion. Ours read the dataset columns `gold_index` and `target` and the
`closed` fact derived from the exact sampled ids, so a chain that never wrote
`</think>` before the token cap is *unfinished* whatever its text says.

The rules reproduce the research's recipe: +1 right, −1 wrong, +0.2 for a
defensible (non-gold, target mass ≥ `defensible_min`) answer on a soft-label
question, −1.5 for a chain still open at the cap, a length penalty above a
target length, and a small format bonus for `</think>` followed by `Answer: X`.

Examples (hand-written completions; see tests/decision/test_rl_rewards.py):
    correctness(["…</think>\\nAnswer: B"], closed=[True], gold_index=[1], target=[[0, 1]]) == [1.0]
    unfinished(closed=[False, True]) == [-1.5, 0.0]
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.decision.rl.config import RewardParams

RewardFn = Callable[..., list]

_FORMAT = re.compile(r"</think>\s*Answer:\s*[A-H]\s*$")




# ------------------------------------------------------------- pure rules
def correctness(completions: Sequence[str], closed: Sequence[bool], gold_index: Sequence[int],
                target: Sequence[Sequence[float]], right: float = 1.0, wrong: float = -1.0,
                defensible: float = 0.2, defensible_min: float = 0.1, **_: Any) -> list[float | None]:
    """Right / defensible / wrong for a closed chain; None for an unfinished one (`unfinished` scores it)."""
    out: list[float | None] = []
    for text, done, gold, tgt in zip(completions, closed, gold_index, target, strict=True):
        if not done:
            out.append(None)
            continue
        pred = parse_answer(text, len(tgt))
        if pred == gold:
            out.append(right)
        elif pred is not None and tgt[pred] >= defensible_min and sum(p > 1e-9 for p in tgt) > 1:
            out.append(defensible)
        else:
            out.append(wrong)
    return out


def unfinished(closed: Sequence[bool], penalty: float = -1.5, **_: Any) -> list[float]:
    """`penalty` for a chain that never closed its thinking within the cap, 0 otherwise."""
    return [0.0 if done else penalty for done in closed]


def length(completion_ids: Sequence[Sequence[int]], target_tokens: int = 64, per_token: float = 0.01,
           max_penalty: float = 0.5, **_: Any) -> list[float]:
    """−per_token × tokens above `target_tokens`, at most −max_penalty; 0 at or below it."""
    return [-min(max_penalty, per_token * max(0, len(ids) - target_tokens)) for ids in completion_ids]


def format_reward(completions: Sequence[str], closed: Sequence[bool], bonus: float = 0.1, **_: Any) -> list[float]:
    """`bonus` when a closed chain ends in exactly `</think> Answer: X` (the format evaluation parses)."""
    return [bonus if done and _FORMAT.search(text.strip()) else 0.0 for text, done in zip(completions, closed)]


def closed_chains(completion_ids: Sequence[Sequence[int]], close_id: int) -> list[bool]:
    """Whether each completion's exact sampled ids contain `</think>`."""
    return [close_id in ids for ids in completion_ids]


# --------------------------------------------------------------- registry
def _rule_kwargs(name: str, p: RewardParams) -> dict:
    return {"correctness": dict(right=p.right, wrong=p.wrong, defensible=p.defensible,
                                defensible_min=p.defensible_min),
            "unfinished": dict(penalty=p.unfinished),
            "length": dict(target_tokens=p.length_target, per_token=p.length_per_token, max_penalty=p.length_max_penalty),
            "format": dict(bonus=p.format_bonus)}[name]


REWARDS: dict[str, RewardFn] = {"correctness": correctness, "unfinished": unfinished, "length": length,
                                "format": format_reward}


def checked(name: str, values: Any, expected: int) -> list[float | None]:
    """A reward function's output, or a PipelineError naming it (wrong count, NaN, not a number)."""
    if not isinstance(values, (list, tuple)) or len(values) != expected:
        got = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
        raise PipelineError(f"rl: reward '{name}' returned {got} values for {expected} completions; "
                            "a reward returns one float or None per completion")
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise PipelineError(f"rl: reward '{name}' returned {v!r}; rewards must be finite numbers or None")
    return [None if v is None else float(v) for v in values]


def make_reward_funcs(weights: dict[str, float], p: RewardParams, close_id: int,
                      registry: dict[str, RewardFn] | None = None,
                      on_scored: Callable[[str, list, dict], None] | None = None) -> tuple[list[RewardFn], list[float]]:
    """TRL reward callables (named after the registry entry) and their weights, in `weights` order.

    Each callable derives `closed` from the exact completion ids, calls the pure rule with
    the params' numbers and checks its output; `on_scored(name, values, kwargs)` sees every result
    (the rollout log). An unknown name is a clear error listing the known ones.
    """
    registry = REWARDS if registry is None else registry
    funcs = []
    for name in weights:
        if name not in registry:
            raise PipelineError(f"params.yaml: rl.rewards.{name}: unknown reward; known rewards are "
                                f"{', '.join(sorted(registry))}")
        funcs.append(_bind(name, registry[name], _rule_kwargs(name, p) if name in REWARDS else {}, close_id,
                           on_scored))
    return funcs, [float(weights[n]) for n in weights]


def _bind(name: str, rule_fn: RewardFn, rule_kwargs: dict, close_id: int,
          on_scored: Callable[[str, list, dict], None] | None) -> RewardFn:
    def reward(prompts=None, completions=None, completion_ids=None, **kwargs):
        closed = closed_chains(completion_ids, close_id)
        values = checked(name, rule_fn(completions=completions, completion_ids=completion_ids, closed=closed,
                                       **{**kwargs, **rule_kwargs}), len(completion_ids))
        if on_scored is not None:
            on_scored(name, values, {"completions": completions, "completion_ids": completion_ids,
                                     "closed": closed, **kwargs})
        return values
    reward.__name__ = name
    return reward
