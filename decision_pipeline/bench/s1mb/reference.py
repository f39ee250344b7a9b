"""The same metrics as ``metrics.py`` written as a plain per-decision Python loop.

This is deliberately a line-by-line transcription of the upstream evaluator
(``metrics.calculate`` + ``diagnostics.diagnostics``): easy to audit against
the spec, slow on purpose. Tests use it as an oracle for the vectorised code
and ``benchmarks/bench_s1mb.py`` uses it as the timing baseline. It does not
validate its input.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import median

from .definitions import EPSILON, PRIMARY_METRIC
from .records import Decision, Prediction

__all__ = ["reference_metrics"]


def reference_metrics(
    task: str, decisions: Sequence[Decision], predictions: Iterable[Prediction]
) -> dict[str, float | None]:
    """Upstream arithmetic, one decision at a time (D = ``decisions``, R = successful predictions)."""
    index = {(d.case_id, d.question_id): d for d in decisions}
    entries = list(index.values())
    rows = [(index[p.case_id, p.question_id], p.probabilities) for p in predictions if p.probabilities is not None]
    n = len(rows)
    values = []
    for d, p in rows:
        t = d.target
        if task == "choice":
            chosen = max(d.options, key=lambda o: p[o])  # first maximum wins ties
            values.append(t[chosen])
        elif task == "noul":
            values.append((p["true"] - t["true"]) ** 2)
        else:
            scale = dict(zip(d.options, d.values))  # type: ignore[arg-type]
            values.append(abs(sum(scale[k] * (p[k] - t[k]) for k in scale)) / (max(scale.values()) - min(scale.values())))
    out: dict[str, float | None] = {PRIMARY_METRIC[task]: sum(values) / len(values) if values else None}
    skill = None
    if task == "noul":
        prevalence = sum(d.target["true"] for d in entries) / len(entries)
        tp = sum(d.target["true"] for d, p in rows if p["true"] >= 0.5)
        fp = sum(d.target["false"] for d, p in rows if p["true"] >= 0.5)
        fn = sum(d.target["true"] for d, p in rows if p["true"] < 0.5)
        tn = sum(d.target["false"] for d, p in rows if p["true"] < 0.5)
        recall = tp / (tp + fn) if tp + fn > EPSILON else None
        specificity = tn / (tn + fp) if tn + fp > EPSILON else None
        balanced = (recall + specificity) / 2 if recall is not None and specificity is not None else None
        baseline = sum((d.target["true"] - prevalence) ** 2 for d in entries) / len(entries)
        brier = out["binary_brier"]
        skill = 2 * balanced - 1 if balanced is not None else None
        out.update({
            "accuracy": (tp + tn) / n if n else None,
            "positive_recall": recall,
            "specificity": specificity,
            "precision": tp / (tp + fp) if tp + fp > EPSILON else None,
            "balanced_accuracy": balanced,
            "f1": 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn > EPSILON else None,
            "true_positive": tp,
            "false_positive": fp,
            "false_negative": fn,
            "true_negative": tn,
            "positive_prevalence": prevalence,
            "majority_accuracy_baseline": max(prevalence, 1 - prevalence),
            "constant_brier_baseline": baseline,
            "brier_skill": 1 - brier / baseline if baseline > EPSILON and brier is not None else None,
        })
    elif task == "choice":
        uniform = sum(1 / len(d.options) for d in entries) / len(entries)
        ids = {o for d in entries for o in d.options}
        fixed_id = max(sum(d.target.get(x, 1 / len(d.options)) for d in entries) / len(entries) for x in ids)
        fixed_position = max(
            sum(d.target[d.options[j]] if j < len(d.options) else 1 / len(d.options) for d in entries) / len(entries)
            for j in range(max(len(d.options) for d in entries))
        )
        baseline = max(uniform, fixed_id, fixed_position)
        accuracy = out["target_mass_at_prediction"]
        skill = (accuracy - baseline) / (1 - baseline) if accuracy is not None and baseline < 1 - EPSILON else None
        out.update({"uniform_accuracy_baseline": uniform, "fixed_answer_accuracy_baseline": baseline})
    else:
        def expected(d: Decision) -> float:
            scale = dict(zip(d.options, d.values))  # type: ignore[arg-type]
            low, high = min(scale.values()), max(scale.values())
            return sum((v - low) / (high - low) * d.target[k] for k, v in scale.items())

        targets = [expected(d) for d in entries]
        constant = median(targets)
        baseline = sum(abs(t - constant) for t in targets) / len(targets)
        errors = []
        for d, p in rows:
            scale = dict(zip(d.options, d.values))  # type: ignore[arg-type]
            width = max(scale.values()) - min(scale.values())
            errors.append(sum(v * (p[k] - d.target[k]) for k, v in scale.items()) / width)
        mae = out["normalized_expected_score_mae"]
        skill = 1 - mae / baseline if baseline > EPSILON and mae is not None else None
        out.update({
            "normalized_score_rmse": (sum(e * e for e in errors) / n) ** 0.5 if n else None,
            "constant_score_baseline": constant,
            "constant_mae_baseline": baseline,
        })
    out["baseline_adjusted_skill"] = skill
    out["baseline_adjusted_score"] = max(0.0, min(1.0, skill)) if skill is not None else None
    return out
