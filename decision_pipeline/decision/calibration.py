"""Per-task temperatures for a readout, kept only where the data support them.

A temperature is fitted by NLL for each question type (choice / noul / score),
then kept only if a likelihood-ratio test against T = 1 is significant at
`alpha`. A readout trained on soft targets is often calibrated already; an NLL
fit on a few hundred such items returns a temperature that fits noise and
makes held-out ECE worse (`resplit_study` measures exactly that).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from decision_pipeline.common import stats
from decision_pipeline.common.params import rule
from decision_pipeline.decision.answering import readout_summary
from decision_pipeline.questions.schema import gold_index


LOWER_BOUND, UPPER_BOUND = 0.05, 20.0  # the temperature search range


@dataclass
class CalibrateParams:
    """params.yaml `calibrate`: per-task temperatures on the calibration split."""
    items: int = rule(min=1, doc="calibration questions used (a seed-free SHA-256 subset)")
    alpha: float = rule(min=0.0, max=1.0, doc="level of the likelihood-ratio test a fitted temperature must pass")
    resplits: int = rule(min=0, doc="halvings in the study of that rule on the calibration items (0 = skip)")
    ece_bins: int = rule(min=2, doc="equal-width confidence bins of the ECE")


def significant_temperatures(logits: Sequence[np.ndarray], questions: Sequence[dict],
                             alpha: float) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, str]]:
    """(kept, fitted, LR-test p-values, bounds hit) per task; kept is 1.0 where p ≥ alpha.

    A fit at the lower bound (every item right: NLL keeps falling as T → 0) is
    never kept — one later error would cost margin/T nats; the χ² test does not
    hold at a bound either. A fit at the upper bound (logits carry no signal for
    that task) is kept as the near-uniform readout it is, and flagged.
    """
    kept, fitted, p_values, bounds = {}, {}, {}, {}
    for task in sorted({q["task"] for q in questions}):
        idx = [i for i, q in enumerate(questions) if q["task"] == task]
        lg, gold = [logits[i] for i in idx], [gold_index(questions[i]) for i in idx]
        t = float(stats.fit_temperature(lg, gold, lo=LOWER_BOUND, hi=UPPER_BOUND))
        p = stats.temperature_lr_test(lg, gold, t)
        fitted[task], p_values[task] = round(t, 6), round(p, 6)
        if t <= LOWER_BOUND * 1.001:
            bounds[task] = "lower"
        elif t >= UPPER_BOUND * 0.999:
            bounds[task] = "upper"
        kept[task] = fitted[task] if p < alpha and bounds.get(task) != "lower" else 1.0
    return kept, fitted, p_values, bounds


def fit_and_report(logits: Sequence[np.ndarray], questions: Sequence[dict], n_bins: int,
                   alpha: float = 0.05) -> dict:
    """Kept and fitted temperatures, test p-values, and readout metrics at T = 1 and at the kept ones."""
    if not questions:
        return {"temperatures": {}, "fitted": {}, "p_value": {}, "at_bound": {}, "before": None, "after": None}
    kept, fitted, p_values, bounds = significant_temperatures(logits, questions, alpha)
    return {"temperatures": kept, "fitted": fitted, "p_value": p_values, "at_bound": bounds,
            "before": readout_summary(logits, questions, None, n_bins),
            "after": readout_summary(logits, questions, kept, n_bins)}


def _spread(values: np.ndarray) -> dict:
    low, high = np.percentile(values, [2.5, 97.5])
    return {"mean": round(float(values.mean()), 6), "p2_5": round(float(low), 6), "p97_5": round(float(high), 6)}


def resplit_study(logits: Sequence[np.ndarray], questions: Sequence[dict], n_bins: int, alpha: float,
                  n_splits: int, seed: int) -> dict | None:
    """Fit on a random half, score the other half; ECE/NLL change vs T = 1, tested vs always-fit.

    Uses only the calibration items, so the rule is judged without looking at
    the eval split. Per rule: the held-out ECE change over `n_splits` seeded
    halvings (mean and 2.5–97.5 percentile spread — halvings overlap, so this is
    split-to-split spread, not a confidence interval), the shares of halvings
    where ECE went down / stayed exactly equal (T = 1 kept) / went up, and the
    per-halving difference between the rules. Each half has half the items, so
    the rule is judged with less power than it is deployed with.
    """
    if n_splits == 0 or len(questions) < 4:
        return None
    rng = np.random.default_rng(seed)
    changes: dict[str, list[tuple[float, float]]] = {"tested": [], "always_fit": []}
    for _ in range(n_splits):
        order = rng.permutation(len(questions))
        fit_idx, held_idx = order[: len(order) // 2], order[len(order) // 2:]
        kept, fitted, _, _ = significant_temperatures([logits[i] for i in fit_idx],
                                                      [questions[i] for i in fit_idx], alpha)
        held_lg, held_q = [logits[i] for i in held_idx], [questions[i] for i in held_idx]
        at_one = readout_summary(held_lg, held_q, None, n_bins)
        for name, temps in (("tested", kept), ("always_fit", fitted)):
            after = readout_summary(held_lg, held_q, temps, n_bins)
            changes[name].append((after["ece"] - at_one["ece"], after["nll"] - at_one["nll"]))
    out: dict = {"n_splits": n_splits}
    arrays = {name: np.array(rows) for name, rows in changes.items()}
    for name, arr in arrays.items():
        ece = arr[:, 0]
        out[name] = {"ece_change": _spread(ece), "nll_change_mean": round(float(arr[:, 1].mean()), 6),
                     "ece_better_share": round(float((ece < -1e-12).mean()), 4),
                     "ece_unchanged_share": round(float((np.abs(ece) <= 1e-12).mean()), 4),
                     "ece_worse_share": round(float((ece > 1e-12).mean()), 4)}
    out["tested_minus_always_fit"] = {"ece": _spread(arrays["tested"][:, 0] - arrays["always_fit"][:, 0]),
                                      "nll_mean": round(float((arrays["tested"][:, 1] - arrays["always_fit"][:, 1]).mean()), 6)}
    return out


def calibrate_answers(logits: Sequence[np.ndarray], chains: Sequence[dict], questions: Sequence[dict],
                      p: CalibrateParams, seed: int) -> tuple[dict, dict]:
    """Temperatures for the readout and the post-chain readout, and the report behind them.

    Returns (temperatures {"readout": {...}, "post_chain": {...}}, report).
    """
    post = [(c["post_logits"], q) for c, q in zip(chains, questions) if c["post_logits"] is not None]
    post_logits, post_questions = [lg for lg, _ in post], [q for _, q in post]
    report = {"readout": fit_and_report(logits, questions, p.ece_bins, p.alpha),
              "post_chain": fit_and_report(post_logits, post_questions, p.ece_bins, p.alpha),
              "resplit": {"readout": resplit_study(logits, questions, p.ece_bins, p.alpha, p.resplits, seed),
                          "post_chain": resplit_study(post_logits, post_questions, p.ece_bins, p.alpha,
                                                      p.resplits, seed)},
              "n_items": len(questions), "post_chain_items": len(post)}
    temps = {"readout": report["readout"]["temperatures"], "post_chain": report["post_chain"]["temperatures"]}
    return temps, report
