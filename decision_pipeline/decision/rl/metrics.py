"""RL run metrics from the rollout log and TRL's log history: per-round rows and the reward gain.

Why the rollout log and not only TRL's log: TRL averages per step, while the
questions the research cares about (did reward rise beyond prompt-to-prompt
noise? what share of groups had mixed right/wrong chains?) need per-prompt
numbers. Each prompt is used in exactly one round, so the prompts of the first
and of the last quarter of the run are independent samples.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from decision_pipeline.common import stats

# TRL log keys copied into the per-round rows (absent ones are skipped: e.g. kl only with beta > 0,
# importance-sampling ratios only with vLLM)
TRL_KEYS = {"loss": "loss", "grad_norm": "grad_norm", "entropy": "entropy", "kl": "kl",
            "clip_ratio/region_mean": "clip_ratio", "clip_ratio/low_mean": "clip_ratio_low",
            "clip_ratio/high_mean": "clip_ratio_high", "learning_rate": "learning_rate",
            "sampling/importance_sampling_ratio/mean": "is_ratio_mean",
            "sampling/importance_sampling_ratio/max": "is_ratio_max"}


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)


def _group_stats(rows: Sequence[dict]) -> dict:
    """Per round: reward mean/std, unfinished share, tokens, mixed-group share, markers per finished chain."""
    totals = np.array([r["total"] for r in rows], dtype=float)
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r["question_id"]].append(r)
    mixed = [len({g["answer"] == g["gold_index"] and g["closed"] for g in grp}) == 2 for grp in groups.values()]
    finished = [r for r in rows if r["closed"]]
    out = {"prompts": len(groups), "completions": len(rows), "reward": _r(totals.mean()), "reward_std": _r(totals.std()),
           "unfinished_share": _r(np.mean([not r["closed"] for r in rows])),
           "mean_completion_tokens": _r(np.mean([r["n_tokens"] for r in rows])),
           "mixed_group_share": _r(np.mean(mixed)),
           "chain_accuracy": _r(np.mean([r["closed"] and r["answer"] == r["gold_index"] for r in rows])),
           "markers_per_finished_chain": _r(np.mean([r["markers"] for r in finished])) if finished else None}
    for name in rows[0]["rewards"]:
        vals = np.array([np.nan if r["rewards"][name] is None else r["rewards"][name] for r in rows], dtype=float)
        out[f"{name}_mean"] = _r(np.nanmean(vals)) if np.isfinite(vals).any() else None
        out[f"{name}_std"] = _r(np.nanstd(vals)) if np.isfinite(vals).any() else None
    return out


def round_rows(rollouts: Sequence[dict], history: Sequence[dict], steps_per_generation: int) -> list[dict]:
    """One row per generation round: our per-prompt stats plus TRL's loss/entropy/KL/clip numbers
    averaged over the round's optimizer steps."""
    by_step: dict[int, list[dict]] = defaultdict(list)
    for r in rollouts:
        by_step[r["step"]].append(r)
    logged = {int(h["step"]): h for h in history if "loss" in h and "step" in h}
    rows = []
    for index, step in enumerate(sorted(by_step)):
        row = {"round": index, "step": step, **_group_stats(by_step[step])}
        steps = [logged[s] for s in range(step + 1, step + steps_per_generation + 1) if s in logged]
        for key, name in TRL_KEYS.items():
            vals = [h[key] for h in steps if isinstance(h.get(key), (int, float))]
            if vals:
                row[name] = _r(np.mean(vals))
        rows.append(row)
    return rows


def per_prompt_reward(rollouts: Sequence[dict]) -> dict[str, tuple[int, float]]:
    """question id -> (generation step, mean total reward over its group)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rollouts:
        groups[r["question_id"]].append(r)
    return {q: (grp[0]["step"], float(np.mean([r["total"] for r in grp]))) for q, grp in groups.items()}


def quarter_gain(rollouts: Sequence[dict], max_steps: int, key: str = "total", n_resamples: int = 1000,
                 seed: int = 0) -> dict:
    """Mean per-prompt value over the last quarter of steps minus the first quarter, bootstrap CI over prompts.

    A round generated at step s belongs to the first quarter when s < max_steps / 4 and to the
    last when s >= 3 * max_steps / 4 (at least one round each).
    """
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rollouts:
        groups[r["question_id"]].append(r)
    steps = sorted({r["step"] for r in rollouts})
    first_cut = max(max_steps / 4, steps[0] + 1)
    last_cut = min(3 * max_steps / 4, steps[-1])

    def value(grp: list[dict]) -> float:
        if key == "total":
            return float(np.mean([r["total"] for r in grp]))
        return float(np.mean([key_value(r, key) for r in grp]))

    first = [value(g) for g in groups.values() if g[0]["step"] < first_cut]
    last = [value(g) for g in groups.values() if g[0]["step"] >= last_cut]
    diff, low, high = stats.two_sample_bootstrap_diff(last, first, n_resamples=n_resamples, seed=seed)
    return {"diff": _r(diff), "ci_low": _r(low), "ci_high": _r(high), "first_quarter": _r(np.mean(first)),
            "last_quarter": _r(np.mean(last)), "prompts_first": len(first), "prompts_last": len(last)}


def key_value(row: dict, key: str) -> float:
    """A per-completion quantity by name: unfinished, tokens, correct."""
    if key == "unfinished":
        return float(not row["closed"])
    if key == "tokens":
        return float(row["n_tokens"])
    if key == "correct":
        return float(row["closed"] and row["answer"] == row["gold_index"])
    raise KeyError(key)


def run_summary(rollouts: Sequence[dict], history: Sequence[dict], rounds: Sequence[dict], max_steps: int,
                n_resamples: int, seed: int) -> dict:
    """metrics/rl.json: reward gain with CI, first/last quarter of the other curves, mixed-group share."""
    gains = {name: quarter_gain(rollouts, max_steps, name, n_resamples, seed)
             for name in ("correct", "unfinished", "tokens")}
    losses = [h["loss"] for h in history if isinstance(h.get("loss"), (int, float))]
    finished_markers = [r["markers"] for r in rollouts if r["closed"]]
    return {"reward_gain": quarter_gain(rollouts, max_steps, "total", n_resamples, seed),
            "chain_accuracy_gain": gains["correct"], "unfinished_share_change": gains["unfinished"],
            "completion_tokens_change": gains["tokens"],
            "mixed_group_share": _r(np.mean([r["mixed_group_share"] for r in rounds])),
            "markers_per_finished_chain": _r(np.mean(finished_markers)) if finished_markers else None,
            "rounds": len(rounds), "prompts": len({r["question_id"] for r in rollouts}),
            "completions": len(rollouts), "final_loss": _r(losses[-1]) if losses else None}
