"""The `rl` stage's run around the GRPO trainer: which questions train, and what the run reports.

Why a module (beside sft_run.py): the stage entry point did this itself — checked the selection,
counted origins, built the metrics — so the rules were only testable by running the stage. Here
they are functions of data: the selection check, and the metrics with the research's analyses
(reward trend adjusted for difficulty by the probe's pass rate, answer collapse per round).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.rl_analyses import answer_collapse, difficulty_adjusted_trend, probe_baseline
from decision_pipeline.decision.rl_metrics import round_rows, run_summary
from decision_pipeline.decision.rl_trainer import RLParams

ORIGINS = ("fresh", "sft")


def training_questions(selected: Sequence[Mapping], items_by_id: Mapping[str, dict], p: RLParams,
                       where: str) -> list[dict]:
    """The first `p.prompts_needed` selected questions (each used in one round), or one clear line."""
    if len(selected) < p.prompts_needed:
        raise PipelineError(f"{where}: {len(selected)} questions selected, but {p.rounds} rounds x "
                            f"{p.prompts_per_round} prompts need {p.prompts_needed} (each question is used once); "
                            "lower rl.max_steps or rl.prompts_per_round, or probe more (rl_probe.*_questions)")
    missing = [s["id"] for s in selected[: p.prompts_needed] if s["id"] not in items_by_id]
    if missing:
        raise PipelineError(f"{where}: question {missing[0]!r} is not in the items file; rerun rl_select")
    return [items_by_id[s["id"]] for s in selected[: p.prompts_needed]]


def run_metrics(rollouts: Sequence[Mapping], history: Sequence[Mapping], p: RLParams, seed: int,
                selected: Sequence[Mapping], questions: Sequence[Mapping],
                probe_rows: Sequence[Mapping]) -> tuple[dict, list[dict]]:
    """(metrics/rl.json, the per-round rows): reward gain, origins, difficulty-adjusted trend, collapse."""
    rounds = round_rows(rollouts, history, p.steps_per_generation)
    metrics = run_summary(rollouts, history, rounds, p.max_steps, 1000, seed)
    origins = {s["id"]: s["origin"] for s in selected}
    metrics.update(steps=p.max_steps,
                   prompts_by_origin={o: sum(origins[q["id"]] == o for q in questions) for o in ORIGINS})
    if probe_rows:
        k = int(probe_rows[0]["k"])
        metrics["difficulty_adjusted_reward"] = difficulty_adjusted_trend(rollouts, probe_baseline(probe_rows, k),
                                                                          1000, seed)
    metrics["answer_collapse"] = answer_collapse(rollouts)
    return metrics, rounds
