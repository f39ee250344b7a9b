"""RL analyses the research ran: reward trend adjusted for question difficulty, and the answer-collapse check.

Why: raw reward can rise because later rounds happened to draw easier prompts; subtracting each
prompt's probe pass rate (the SFT model's share of right chains on it, `rl_probe`) leaves what the
policy gained on that prompt. And a policy can raise reward on a skewed label mix by always
answering one letter: the share of the most common answer per round, beside the same share among
the gold letters, shows that collapse. (The loop/unfinished rate before/after RL is the paired
`vs_sft.unfinished_rate` of `metrics/evaluate/rl.json`.) Inputs are the rollout log rows
(question_id, step, answer, gold_index, closed) and the probe rows (id, correct); pure functions.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from decision_pipeline.common.errors import PipelineError


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)


def probe_baseline(probe_rows: Sequence[Mapping[str, Any]], k: int) -> dict[str, float]:
    """Per question id: the probe's share of right chains (correct / k)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return {str(r["id"]): float(r["correct"]) / k for r in probe_rows}


def difficulty_adjusted_trend(rollouts: Sequence[Mapping[str, Any]], baseline: Mapping[str, float],
                              n_resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per round the mean of (chain right − probe pass rate) over its prompts, and the least-squares
    slope per round with a prompt-bootstrap 95% CI (each prompt is used in one round only)."""
    per_prompt: dict[str, list] = defaultdict(list)
    for r in rollouts:
        per_prompt[str(r["question_id"])].append(r)
    missing = [q for q in per_prompt if q not in baseline]
    if missing:
        raise PipelineError(f"rollout question {missing[0]!r} has no probe row ({len(missing)} missing); "
                            "rerun rl_probe on the questions rl_select kept")
    steps = sorted({int(r["step"]) for r in rollouts})
    round_of = {s: i for i, s in enumerate(steps)}
    xs, ys = [], []
    for q, rows in per_prompt.items():
        right = np.mean([bool(r["closed"]) and r["answer"] == r["gold_index"] for r in rows])
        xs.append(round_of[int(rows[0]["step"])])
        ys.append(float(right) - baseline[q])
    x, y = np.array(xs, dtype=float), np.array(ys)
    rounds = [{"round": i, "prompts": int((x == i).sum()), "adjusted_reward": _r(y[x == i].mean())}
              for i in range(len(steps))]
    out: dict[str, Any] = {"rounds": rounds, "n_prompts": int(y.size), "mean": _r(y.mean()) if y.size else None}
    if len(steps) < 2:
        out["slope_per_round"] = {"point": None, "ci_low": None, "ci_high": None}
        return out
    slope = lambda idx: np.polyfit(x[idx], y[idx], 1)[0] if np.unique(x[idx]).size > 1 else np.nan  # noqa: E731
    rng = np.random.default_rng(seed)
    draws = np.array([slope(rng.integers(0, y.size, y.size)) for _ in range(n_resamples)])
    draws = draws[np.isfinite(draws)]
    lo, hi = np.percentile(draws, [2.5, 97.5]) if draws.size else (None, None)
    out["slope_per_round"] = {"point": _r(slope(np.arange(y.size))), "ci_low": _r(lo), "ci_high": _r(hi)}
    return out


def answer_collapse(rollouts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per round: the most common answer index and its share among parsed answers, beside how often that same
    index is the gold one among those parsed completions (`top_answer_gold_share`: a policy that learned the
    task gives index i about as often as i is right; a collapse gives it far more often). `top_gold_share`,
    the largest share of any gold index, is kept for runs that predate the fair figure: with 16 prompts a
    round its maximum runs high (0.49 where P(gold = 0) is 0.36 in the committed run). `parsed_share` and
    `right_given_parsed` split a reward rise into answering more often and answering better."""
    by_step: dict[int, list] = defaultdict(list)
    for r in rollouts:
        by_step[int(r["step"])].append(r)
    out = []
    for i, step in enumerate(sorted(by_step)):
        rows = by_step[step]
        answers = Counter(r["answer"] for r in rows if r["answer"] is not None)
        gold = Counter(r["gold_index"] for r in rows)
        n = sum(answers.values())
        top, count = answers.most_common(1)[0] if answers else (None, 0)
        parsed = [r for r in rows if r["answer"] is not None]
        top_is_gold = sum(r["gold_index"] == top for r in parsed)
        right = sum(bool(r["closed"]) and r["answer"] == r["gold_index"] for r in parsed)
        out.append({"round": i, "parsed": n, "parsed_share": _r(n / len(rows)),
                    "right_given_parsed": _r(right / n) if n else None,
                    "top_answer": top, "top_answer_share": _r(count / n) if n else None,
                    "top_answer_gold_share": _r(top_is_gold / n) if n else None,
                    "top_gold_share": _r(gold.most_common(1)[0][1] / len(rows))})
    return out


def collapse_last_quarter(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The mean over the last quarter of rounds (at least one) of each round's top-answer share, the share
    of those parsed completions whose gold is that answer, and the top-gold share (`answer_collapse`
    rows): the policy where training ends, beside what its favourite answer is worth there. Rounds
    without a parsed answer are left out of the answer means."""
    last = list(rounds)[-max(1, len(rounds) // 4):] if rounds else []

    def mean(key: str) -> float | None:
        values = [r[key] for r in last if r.get(key) is not None]
        return _r(float(np.mean(values))) if values else None
    return {"top_answer_share": mean("top_answer_share"), "top_answer_gold_share": mean("top_answer_gold_share"),
            "top_gold_share": mean("top_gold_share"), "rounds": len(last)}
