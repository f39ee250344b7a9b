"""Item-bootstrap 95% CIs for S1MB task scores and Task Avg, so a review can tell a change from noise.

Why: a Task Avg over a few hundred questions moves by several points between two draws of the same
items; without an interval every S1MB change reads as "no recorded noise". The unit resampled is the
case (a dataset row and all its questions, which share one input state), within each benchmark, and
every benchmark's metrics (baselines included: they are properties of the items) are recomputed by
the same scorer the results use, then task scores and Task Avg by the §6 rules. Null draws (a task
ineligible in that draw) are left out; an interval from no draws is null.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from decision_pipeline.bench.s1mb import TASKS, BenchmarkScore, task_avg, task_scores
from decision_pipeline.bench.s1mb.aggregate import eligible
from decision_pipeline.bench.s1mb.metrics import score_decisions
from decision_pipeline.bench.s1mb.records import Decision, Prediction


class Scored(NamedTuple):
    """One benchmark's decisions and one variant's predictions for them."""
    benchmark: str
    task: str
    decisions: list[Decision]
    predictions: list[Prediction]


def _resampled(s: Scored, rng: np.random.Generator) -> BenchmarkScore:
    """The benchmark's score over a bootstrap draw of its cases (ids suffixed so repeats stay distinct)."""
    cases = list(dict.fromkeys(d.case_id for d in s.decisions))
    pred = {(p.case_id, p.question_id): p for p in s.predictions}
    by_case: dict[str, list[Decision]] = {}
    for d in s.decisions:
        by_case.setdefault(d.case_id, []).append(d)
    decisions, preds = [], []
    for k, ci in enumerate(rng.integers(0, len(cases), len(cases))):
        for d in by_case[cases[ci]]:
            cid = f"{d.case_id}#{k}"
            decisions.append(d._replace(case_id=cid))
            p = pred.get((d.case_id, d.question_id))
            if p is not None:
                preds.append(Prediction(cid, d.question_id, p.probabilities, p.error))
    m = score_decisions(s.task, decisions, preds, s.benchmark)
    return BenchmarkScore(s.task, m["baseline_adjusted_score"], eligible(s.task, m))


def _interval(draws: list[float], point: float | None) -> dict[str, Any]:
    lo, hi = (float(v) for v in np.percentile(draws, [2.5, 97.5])) if draws else (None, None)
    return {"point": point, "ci_low": lo, "ci_high": hi, "n_draws": len(draws)}


def task_cis(scored: Sequence[Scored], category: Mapping[str, str | None], point_scores: Mapping[str, float | None],
             n_resamples: int, seed: int) -> dict[str, Any]:
    """`{"task_avg": {point, ci_low, ci_high, n_draws}, "task_scores": {task: {...}}, "n_resamples", "unit"}`."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    avg_draws: list[float] = []
    task_draws: dict[str, list[float]] = {t: [] for t in TASKS}
    for _ in range(n_resamples):
        per_task = task_scores({s.benchmark: _resampled(s, rng) for s in scored}, category)
        for t, v in per_task.items():
            if v is not None:
                task_draws[t].append(v)
        avg = task_avg(per_task)
        if avg is not None:
            avg_draws.append(avg)
    return {"task_avg": _interval(avg_draws, task_avg(point_scores)),
            "task_scores": {t: _interval(task_draws[t], point_scores.get(t)) for t in TASKS},
            "n_resamples": int(n_resamples), "confidence": 0.95, "unit": "case within benchmark"}
