"""Eligibility, task scores, Task Avg and Borda (spec §5-7).

These work on per-benchmark summaries (``BenchmarkScore``), never on
predictions, so published results can be ranked without the dataset targets.
All values are on the 0-1 scale; multiply by 100 only for display.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .definitions import EPSILON, TASKS, Benchmark
from .errors import S1MBError

__all__ = [
    "BenchmarkScore", "eligible", "category_tasks", "task_scores", "task_avg",
    "borda", "leaderboard", "display",
]

_BASELINE_KEY = {
    "noul": "positive_prevalence",
    "choice": "fixed_answer_accuracy_baseline",
    "score": "constant_mae_baseline",
}


@dataclass(frozen=True)
class BenchmarkScore:
    """What §6-7 need from one model x benchmark result.

    ``complete`` means ``status == "complete"`` and ``provenance == "measured"``;
    ``eligible`` comes from the result's own stored baseline (see ``eligible``).
    """

    task: str
    adjusted: float | None
    eligible: bool = True
    complete: bool = True
    demo: bool = False


def eligible(task: str, metrics: Mapping[str, Any]) -> bool:
    """Eligibility from the stored baseline: noul eps < pi < 1-eps, choice b < 1-eps, score M0 > eps."""
    key = _BASELINE_KEY.get(task)
    if key is None:
        raise S1MBError(f"task {task!r} is not one of choice/noul/score")
    value = metrics.get(key)
    if value is None:
        raise S1MBError(f"missing baseline metric {key!r}")
    if task == "noul":
        return EPSILON < value < 1 - EPSILON
    return value < 1 - EPSILON if task == "choice" else value > EPSILON


def category_tasks(
    benchmark_ids: Sequence[str], definitions: Mapping[str, Benchmark]
) -> dict[str, str | None]:
    """Map each benchmark id of a category to its task (``None`` = no definition)."""
    return {b: definitions[b].task if b in definitions else None for b in benchmark_ids}


def _covered(score: BenchmarkScore | None) -> bool:
    return score is not None and score.complete


def task_scores(
    scores: Mapping[str, BenchmarkScore], category: Mapping[str, str | None]
) -> dict[str, float | None]:
    """Per-task mean adjusted score of one model over the category (§6 steps 1-4).

    ``category`` maps benchmark id -> task. A task is null when any of its
    benchmarks lacks a complete measured result (even an ineligible one), when
    none is eligible, or when an eligible one has a null adjusted score.
    """
    out: dict[str, float | None] = {}
    for task in TASKS:
        required = [b for b, t in category.items() if t == task]
        if not required or not all(_covered(scores.get(b)) for b in required):
            out[task] = None
            continue
        values = [scores[b].adjusted for b in required if scores[b].eligible]
        if not values or any(v is None for v in values):
            out[task] = None
            continue
        total = 0.0
        for v in values:
            total += v  # type: ignore[operator]
        out[task] = total / len(values)
    return out


def task_avg(scores_by_task: Mapping[str, float | None]) -> float | None:
    """(noul + choice + score) / 3, null if any task score is null (§6 step 5)."""
    values = [scores_by_task.get(t) for t in TASKS]
    if any(v is None for v in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


def borda(
    models: Mapping[str, Mapping[str, BenchmarkScore]], category: Mapping[str, str | None]
) -> dict[str, float | None]:
    """Borda score per model (§7); ``None`` for models outside the cohort or when unavailable.

    Cohort: no demo result in the category, a complete measured result for every
    benchmark of it, and a non-null Task Avg. Borda is null for everyone when the
    cohort has < 2 members, a definition is missing, or any cohort result is
    ineligible or has a non-finite adjusted score. Exactly equal values share
    the average rank; points = (N - 1 - r0) / (N - 1).
    """
    out: dict[str, float | None] = {name: None for name in models}
    cohort = [
        name for name, scores in models.items()
        if category
        and not any(s.demo for b, s in scores.items() if b in category)
        and all(_covered(scores.get(b)) for b in category)
        and task_avg(task_scores(scores, category)) is not None
    ]
    if len(cohort) < 2 or any(task is None for task in category.values()):
        return out
    for b in category:
        for name in cohort:
            s = models[name][b]
            if not s.eligible or s.adjusted is None or not math.isfinite(s.adjusted):
                return out
    size = len(cohort)
    totals = [0.0] * size
    for b in category:
        values = [models[name][b].adjusted for name in cohort]
        order = sorted(range(size), key=lambda i: values[i], reverse=True)  # type: ignore[arg-type,return-value]
        start = 0
        while start < size:
            end = start + 1
            while end < size and values[order[end]] == values[order[start]]:
                end += 1
            points = (size - 1 - (start + end - 1) / 2) / (size - 1)
            for position in range(start, end):
                totals[order[position]] += points
            start = end
    for i, name in enumerate(cohort):
        out[name] = totals[i] / len(category)
    return out


def leaderboard(
    models: Mapping[str, Mapping[str, BenchmarkScore]], category: Mapping[str, str | None]
) -> dict[str, dict[str, Any]]:
    """``{model: {"task_avg", "task_scores": {noul, choice, score}, "borda"}}`` on the 0-1 scale."""
    points = borda(models, category)
    out = {}
    for name, scores in models.items():
        per_task = task_scores(scores, category)
        out[name] = {"task_avg": task_avg(per_task), "task_scores": per_task, "borda": points[name]}
    return out


def display(value: float | None) -> str:
    """Leaderboard text: x100 with two decimals, ``N/A`` for null."""
    return "N/A" if value is None else f"{100 * value:.2f}"
