"""Per-task temperatures for a readout, kept only where the data support them.

A temperature is fitted by NLL for each question type (choice / noul / score),
then kept only if a likelihood-ratio test against T = 1 is significant at
`alpha`. A readout trained on soft targets is often calibrated already; an NLL
fit on a few hundred such items returns a temperature that fits noise and
makes held-out ECE worse (`resplit_study` measures exactly that).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from stages.common import stats
from stages.decision.evaluate import readout_summary
from stages.decision.questions import gold_index


def significant_temperatures(logits: Sequence[np.ndarray], questions: Sequence[dict],
                        alpha: float) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(kept temperatures, fitted temperatures, LR-test p-values) per task; kept is 1.0 where p ≥ alpha."""
    kept, fitted, p_values = {}, {}, {}
    for task in sorted({q["task"] for q in questions}):
        idx = [i for i, q in enumerate(questions) if q["task"] == task]
        lg, gold = [logits[i] for i in idx], [gold_index(questions[i]) for i in idx]
        t = float(stats.fit_temperature(lg, gold))
        fitted[task], p_values[task] = round(t, 6), round(stats.temperature_lr_test(lg, gold, t), 6)
        kept[task] = fitted[task] if p_values[task] < alpha else 1.0
    return kept, fitted, p_values


def fit_and_report(logits: Sequence[np.ndarray], questions: Sequence[dict], n_bins: int,
                   alpha: float = 0.05) -> dict:
    """Kept and fitted temperatures, test p-values, and readout metrics at T = 1 and at the kept ones."""
    if not questions:
        return {"temperatures": {}, "fitted": {}, "p_value": {}, "before": None, "after": None}
    kept, fitted, p_values = significant_temperatures(logits, questions, alpha)
    return {"temperatures": kept, "fitted": fitted, "p_value": p_values,
            "before": readout_summary(logits, questions, None, n_bins),
            "after": readout_summary(logits, questions, kept, n_bins)}


def resplit_study(logits: Sequence[np.ndarray], questions: Sequence[dict], n_bins: int, alpha: float,
                  n_splits: int, seed: int) -> dict | None:
    """Fit on a random half, score the other half; ECE/NLL change vs T = 1, tested vs always-fit.

    Uses only the calibration items, so the rule is judged without looking at
    the eval split. Means over `n_splits` seeded halvings; `ece_worse_share` is
    the share of halvings where held-out ECE went up.
    """
    if n_splits == 0 or len(questions) < 4:
        return None
    rng = np.random.default_rng(seed)
    changes: dict[str, list[tuple[float, float]]] = {"tested": [], "always_fit": []}
    for _ in range(n_splits):
        order = rng.permutation(len(questions))
        fit_idx, held_idx = order[: len(order) // 2], order[len(order) // 2:]
        kept, fitted, _ = significant_temperatures([logits[i] for i in fit_idx], [questions[i] for i in fit_idx], alpha)
        held_lg, held_q = [logits[i] for i in held_idx], [questions[i] for i in held_idx]
        at_one = readout_summary(held_lg, held_q, None, n_bins)
        for name, temps in (("tested", kept), ("always_fit", fitted)):
            after = readout_summary(held_lg, held_q, temps, n_bins)
            changes[name].append((after["ece"] - at_one["ece"], after["nll"] - at_one["nll"]))
    out: dict = {"n_splits": n_splits}
    for name, rows in changes.items():
        arr = np.array(rows)
        out[name] = {"ece_change_mean": round(float(arr[:, 0].mean()), 6),
                     "ece_worse_share": round(float((arr[:, 0] > 1e-12).mean()), 4),
                     "nll_change_mean": round(float(arr[:, 1].mean()), 6)}
    return out
