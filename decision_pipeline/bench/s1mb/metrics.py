"""Per-benchmark metrics for noul, choice and score (spec §4), vectorised with numpy.

The formulas are upstream's, unchanged: baselines over *all* decisions D,
model metrics over the successful predictions R, ``None`` wherever a
denominator vanishes. The work is split the same way:

* ``prepare`` validates the targets of D, lays them out as arrays in authored
  option order and computes the baselines once;
* ``score_prepared`` validates one model's predictions, lays them out the same
  way and computes the model metrics with a few numpy reductions.

So scoring several models on one benchmark pays for D once. ``reference.py``
holds the plain per-decision loop; the tests check both agree to 1e-12.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress
from operator import attrgetter
from typing import Any

import numpy as np

from .dataset import benchmark_decisions
from .definitions import EPSILON, METRIC_KEYS, TASKS, Benchmark
from .errors import S1MBError, show_ids
from .records import Case, Decision, Prediction, check_probabilities, parse_prediction

__all__ = ["PreparedBenchmark", "prepare", "prepare_benchmark", "score_prepared",
           "score_benchmark", "score_decisions", "adjusted_score"]

Metrics = dict[str, float | None]


def adjusted_score(skill: float | None) -> float | None:
    """S = clip(skill, 0, 1); null iff the skill is null (§5)."""
    return None if skill is None else max(0.0, min(1.0, skill))


def _gather(dists: Sequence[Any], options: Sequence[tuple[str, ...]], what: str,
            locate: Callable[[int], dict[str, Any]]) -> list[Any]:
    """All probabilities in authored option order; raises on key mismatches."""
    try:  # fast path, all in C: plain dicts whose keys are already in authored order
        if list(map(tuple, dists)) == list(options):
            return list(chain.from_iterable(map(dict.values, dists)))
    except TypeError:
        pass
    values: list[Any] = []
    for i, (dist, opts) in enumerate(zip(dists, options)):
        try:
            if len(dist) != len(opts):
                raise KeyError
            values.extend(map(dist.__getitem__, opts))
        except (KeyError, TypeError, AttributeError):
            check_probabilities(dist, opts, what, **locate(i))
            raise AssertionError("unreachable: check_probabilities raises") from None
    return values


class _Flat:
    """Distributions laid out in authored option order: a flat vector plus row offsets.

    Building it validates every distribution (§3.3): keys equal the option ids,
    values finite in [0, 1], sums within 1e-5 of 1. The checks run vectorised;
    the exact per-row check then words the error for the first bad row.
    """

    def __init__(self, dists: Sequence[Any], options: Sequence[tuple[str, ...]], what: str,
                 locate: Callable[[int], dict[str, Any]]) -> None:
        values = _gather(dists, options, what, locate)
        self.counts = np.fromiter(map(len, options), dtype=np.intp, count=len(options))
        self.starts = np.cumsum(self.counts) - self.counts
        if not set(map(type, values)) <= {float, int}:  # bools, strings, None ...
            for i in range(len(dists)):
                check_probabilities(dists[i], options[i], what, **locate(i))
        self.flat = np.asarray(values, dtype=np.float64)
        if len(self.flat):
            bad = ~(np.isfinite(self.flat) & (self.flat >= 0) & (self.flat <= 1))
            suspect = np.abs(np.add.reduceat(self.flat, self.starts) - 1) > 1e-5 - 1e-9  # exact check decides
            suspect[np.repeat(np.arange(len(self.counts)), self.counts)[bad]] = True
            for i in np.flatnonzero(suspect):
                check_probabilities(dists[i], options[i], what, **locate(int(i)))

    def padded(self, fill: float) -> np.ndarray:
        """(rows x max options) matrix; cells past a row's option count hold ``fill``."""
        width = int(self.counts.max()) if len(self.counts) else 1
        out = np.full((len(self.counts), width), fill, dtype=np.float64)
        row = np.repeat(np.arange(len(self.counts)), self.counts)
        out[row, np.arange(len(self.flat)) - self.starts[row]] = self.flat
        return out


@dataclass(frozen=True)
class PreparedBenchmark:
    """One benchmark's decisions D as arrays, with its baseline metrics already computed."""

    benchmark_id: str | None
    task: str
    decisions: Sequence[Decision]
    index: dict[tuple[str, str], int]
    baselines: Metrics
    targets: np.ndarray            # (N x max options), padded with 0
    true_col: np.ndarray | None    # noul: column of "true" per decision
    values: np.ndarray | None      # score: option values, padded with 0
    width: np.ndarray | None       # score: hi - lo per decision


def prepare(task: str, decisions: Sequence[Decision], benchmark_id: str | None = None) -> PreparedBenchmark:
    """Validate the targets of D and compute the task's baselines over all of D."""
    if task not in TASKS:
        raise S1MBError(f"task {task!r} is not one of choice/noul/score", benchmark=benchmark_id)
    if not decisions:
        raise S1MBError("benchmark has no decisions", benchmark=benchmark_id)
    index = {(d.case_id, d.question_id): i for i, d in enumerate(decisions)}
    if len(index) != len(decisions):
        raise S1MBError("duplicate (case, question) among the decisions", benchmark=benchmark_id)
    _check_options(task, decisions, benchmark_id)
    flat = _Flat([d.target for d in decisions], [d.options for d in decisions], "target",
                 lambda i: {"benchmark": benchmark_id, "case": decisions[i].case_id,
                            "question": decisions[i].question_id})
    targets = flat.padded(0.0)
    true_col = values = width = None
    if task == "noul":
        true_col = np.fromiter((d.options.index("true") for d in decisions), dtype=np.intp, count=len(decisions))
        baselines = _noul_baselines(targets[np.arange(len(decisions)), true_col])
    elif task == "choice":
        baselines = _choice_baselines(decisions, flat)
    else:
        values, lo, width = _score_scale(decisions, flat, benchmark_id)
        baselines = _score_baselines(values, lo, width, targets)
    return PreparedBenchmark(benchmark_id, task, decisions, index, baselines, targets, true_col, values, width)


def _check_options(task: str, decisions: Sequence[Decision], benchmark_id: str | None) -> None:
    """Option rules the arrays rely on (already true for decisions built from cases)."""
    def fail(d: Decision, detail: str) -> S1MBError:
        return S1MBError(detail, benchmark=benchmark_id, case=d.case_id, question=d.question_id)

    for d in decisions:
        if task == "noul":
            if d.options not in (("false", "true"), ("true", "false")):
                raise fail(d, f"noul option ids must be exactly 'false' and 'true', got {show_ids(d.options)}")
        elif len(d.options) < 2 or len(set(d.options)) != len(d.options):
            raise fail(d, f"needs at least 2 distinct option ids, got {show_ids(d.options)}")
    if task != "score":
        return
    shapes_ok = all(d.values is not None and len(d.values) == len(d.options) for d in decisions)
    if shapes_ok and set(map(type, chain.from_iterable(d.values for d in decisions))) <= {float, int}:  # type: ignore[arg-type]
        return
    for d in decisions:  # word the error for the first bad decision
        values = d.values or ()
        if len(values) != len(d.options) or not all(type(v) in (float, int) for v in values):
            raise fail(d, "score decisions need one numeric value per option")


def _score_scale(decisions: Sequence[Decision], flat: _Flat, benchmark_id: str | None) -> tuple[np.ndarray, ...]:
    """Option values (padded with 0), lo and hi - lo per decision; the scale must be finite and non-constant."""
    flat_values = np.fromiter(chain.from_iterable(d.values for d in decisions),  # type: ignore[arg-type]
                              dtype=np.float64, count=len(flat.flat))
    lo = np.minimum.reduceat(flat_values, flat.starts)
    width = np.maximum.reduceat(flat_values, flat.starts) - lo
    bad = np.flatnonzero(~np.isfinite(width) | (width <= 0))
    if len(bad):
        d = decisions[int(bad[0])]
        raise S1MBError(f"score option values {list(d.values)!r} must be finite and not all equal",  # type: ignore[arg-type]
                        benchmark=benchmark_id, case=d.case_id, question=d.question_id)
    values = np.zeros((len(decisions), int(flat.counts.max())))
    row = np.repeat(np.arange(len(decisions)), flat.counts)
    values[row, np.arange(len(flat_values)) - flat.starts[row]] = flat_values
    return values, lo, width


def prepare_benchmark(definition: Benchmark, cases: Iterable[Case]) -> PreparedBenchmark:
    """``prepare`` for a definition and its cases (task filter and count check included)."""
    return prepare(definition.task, benchmark_decisions(definition, cases), definition.id)


def score_prepared(prepared: PreparedBenchmark, predictions: Iterable[Prediction]) -> Metrics:
    """Validate one model's predictions and return exactly the §4.4 metric keys."""
    rows, dists = _successful(prepared, list(predictions))
    decisions = prepared.decisions
    flat = _Flat(dists, [decisions[r].options for r in rows], "prediction",
                 lambda j: {"benchmark": prepared.benchmark_id, "case": decisions[rows[j]].case_id,
                            "question": decisions[rows[j]].question_id})
    rows_arr = np.asarray(rows, dtype=np.intp)
    model = {"noul": _noul_model, "choice": _choice_model, "score": _score_model}[prepared.task]
    out = model(prepared, rows_arr, flat.padded(0.0 if prepared.task != "choice" else -1.0))
    assert tuple(out) == METRIC_KEYS[prepared.task]
    return out


def score_decisions(task: str, decisions: Sequence[Decision], predictions: Iterable[Prediction],
                    benchmark_id: str | None = None) -> Metrics:
    """Metrics for decisions D and predictions (both validated here)."""
    return score_prepared(prepare(task, decisions, benchmark_id), predictions)


def score_benchmark(definition: Benchmark, cases: Iterable[Case],
                    predictions: Iterable[Prediction | Mapping[str, Any]]) -> Metrics:
    """Metrics of one benchmark: filters ``cases`` to its task, checks counts, scores.

    ``predictions`` are ``Prediction`` objects or §3.3 dicts; failed ones (``error``)
    and questions without a prediction are simply not in R.
    """
    preds = [p if isinstance(p, Prediction) else parse_prediction(p, benchmark=definition.id) for p in predictions]
    return score_prepared(prepare_benchmark(definition, cases), preds)


def _successful(prepared: PreparedBenchmark, preds: list[Prediction]) -> tuple[list[int], list[Any]]:
    """Rows of D with a probability prediction (R); unknown or duplicate ids are errors."""
    keys = list(map(attrgetter("case_id", "question_id"), preds))
    rows = list(map(prepared.index.get, keys))
    if None in rows or len(set(rows)) != len(rows):  # rows are unique iff ids are
        seen: set[tuple[str, str]] = set()
        for key, row in zip(keys, rows):
            where = {"benchmark": prepared.benchmark_id, "case": key[0], "question": key[1]}
            if row is None:
                raise S1MBError("prediction for a question that is not in the benchmark", **where)
            if key in seen:
                raise S1MBError("duplicate prediction for the same question", **where)
            seen.add(key)
    dists = list(map(attrgetter("probabilities"), preds))
    ok = [d is not None for d in dists]
    return list(compress(rows, ok)), list(compress(dists, ok))  # type: ignore[arg-type]


def _mean(values: np.ndarray) -> float | None:
    return float(values.sum() / len(values)) if len(values) else None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > EPSILON else None


def _noul_baselines(t_true: np.ndarray) -> Metrics:
    prevalence = float(t_true.sum() / len(t_true))
    return {"positive_prevalence": prevalence,
            "majority_accuracy_baseline": max(prevalence, 1 - prevalence),
            "constant_brier_baseline": float(((t_true - prevalence) ** 2).sum() / len(t_true))}


def _noul_model(prep: PreparedBenchmark, rows: np.ndarray, p: np.ndarray) -> Metrics:
    true_col = prep.true_col
    assert true_col is not None
    tt = prep.targets[rows, true_col[rows]]
    tf = prep.targets[rows, 1 - true_col[rows]]  # the target's own false entry, not 1 - t(true)
    p_true = p[np.arange(len(rows)), true_col[rows]] if len(rows) else np.zeros(0)
    n = len(rows)
    positive = p_true >= 0.5  # exactly 0.5 counts as true
    tp, fp = float(tt[positive].sum()), float(tf[positive].sum())
    fn, tn = float(tt[~positive].sum()), float(tf[~positive].sum())
    recall, specificity = _ratio(tp, tp + fn), _ratio(tn, tn + fp)
    balanced = (recall + specificity) / 2 if recall is not None and specificity is not None else None
    brier = _mean((p_true - tt) ** 2)
    baseline = prep.baselines["constant_brier_baseline"]
    skill = 2 * balanced - 1 if balanced is not None else None
    return {
        "binary_brier": brier, "accuracy": (tp + tn) / n if n else None,
        "positive_recall": recall, "specificity": specificity, "precision": _ratio(tp, tp + fp),
        "balanced_accuracy": balanced, "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "true_positive": tp, "false_positive": fp, "false_negative": fn, "true_negative": tn,
        **prep.baselines,
        "brier_skill": (1 - brier / baseline  # type: ignore[operator]
                        if baseline > EPSILON and brier is not None else None),
        "baseline_adjusted_skill": skill, "baseline_adjusted_score": adjusted_score(skill),
    }


def _choice_baselines(decisions: Sequence[Decision], flat: _Flat) -> Metrics:
    n = len(decisions)
    inverse_k = 1 / flat.counts.astype(np.float64)
    uniform = float(inverse_k.sum() / n)
    # F_id: always answer id x; a question without x counts as a uniform guess 1/k:
    # sum_D g(x) = sum_D 1/k + sum_{d has x} (t_d(x) - 1/k_d): one bincount for every id.
    ids = list(chain.from_iterable(d.options for d in decisions))
    code = {o: i for i, o in enumerate(dict.fromkeys(ids))}
    gain = np.bincount(np.fromiter(map(code.__getitem__, ids), dtype=np.intp, count=len(ids)),
                       weights=flat.flat - np.repeat(inverse_k, flat.counts), minlength=len(code))
    fixed_id = float(((gain + inverse_k.sum()) / n).max())
    # F_pos: always answer position j; a question with fewer options counts as uniform.
    by_position = flat.padded(np.nan)
    by_position = np.where(np.isnan(by_position), inverse_k[:, None], by_position)
    fixed_position = float((by_position.sum(axis=0) / n).max())
    return {"uniform_accuracy_baseline": uniform,
            "fixed_answer_accuracy_baseline": max(uniform, fixed_id, fixed_position)}


def _choice_model(prep: PreparedBenchmark, rows: np.ndarray, p: np.ndarray) -> Metrics:
    accuracy = None
    if len(rows):
        chosen = np.argmax(p, axis=1)  # first maximum = earliest authored option; padding is -1
        accuracy = float(prep.targets[rows, chosen].sum() / len(rows))
    baseline = prep.baselines["fixed_answer_accuracy_baseline"]
    skill = None
    if accuracy is not None and baseline < 1 - EPSILON:  # type: ignore[operator]
        skill = (accuracy - baseline) / (1 - baseline)  # type: ignore[operator]
    return {"target_mass_at_prediction": accuracy, **prep.baselines,
            "baseline_adjusted_skill": skill, "baseline_adjusted_score": adjusted_score(skill)}


def _score_baselines(values: np.ndarray, lo: np.ndarray, width: np.ndarray, targets: np.ndarray) -> Metrics:
    # Baseline side: normalised values (v - lo) / (hi - lo); padded cells have t = 0.
    expected = (((values - lo[:, None]) / width[:, None]) * targets).sum(axis=1)
    constant = statistics.median(expected.tolist())  # even N: mean of the two middle values
    return {"constant_score_baseline": constant,
            "constant_mae_baseline": float(np.abs(expected - constant).sum() / len(expected))}


def _score_model(prep: PreparedBenchmark, rows: np.ndarray, p: np.ndarray) -> Metrics:
    assert prep.values is not None and prep.width is not None
    mae = rmse = None
    if len(rows):
        # Model side: raw values, then divided by the width (upstream keeps this exact form).
        errors = (prep.values[rows] * (p - prep.targets[rows])).sum(axis=1) / prep.width[rows]
        mae = float(np.abs(errors).sum() / len(rows))
        rmse = math.sqrt(float((errors * errors).sum() / len(rows)))
    baseline = prep.baselines["constant_mae_baseline"]
    skill = 1 - mae / baseline if baseline > EPSILON and mae is not None else None  # type: ignore[operator]
    return {"normalized_expected_score_mae": mae, "normalized_score_rmse": rmse, **prep.baselines,
            "baseline_adjusted_skill": skill, "baseline_adjusted_score": adjusted_score(skill)}
