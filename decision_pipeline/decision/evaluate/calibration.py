"""Per-task temperatures for a readout, kept only where the data support them, and the yes/no offset.

A temperature is fitted by NLL for each question type (choice / noul / score),
then kept only if a likelihood-ratio test against T = 1 is significant at
`alpha`. A readout trained on soft targets is often calibrated already; an NLL
fit on a few hundred such items returns a temperature that fits noise and
makes held-out ECE worse (`resplit_study` measures exactly that).

The yes/no offset (the research's): on yes/no items, after the task's temperature, a logit
offset b added to the yes option, fitted by NLL on the calibration split only; its
likelihood-ratio test against b = 0 and a bootstrap CI are recorded, and evaluation applies
it with `apply_yes_offset`. The hypotheses H1–H4 (`calibration_hypotheses`) are tested on the
calibration items by cross-fitting: every item is scored by what the other folds fitted.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Sequence

import numpy as np

from decision_pipeline.common import stats
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_rng
from decision_pipeline.decision.evaluate.answering import readout_summary
from decision_pipeline.questions.schema import gold_index
from decision_pipeline.decision.evaluate.config import OFFSET_MODES, CalibrateParams


LOWER_BOUND, UPPER_BOUND = 0.05, 20.0  # the temperature search range
OFFSET_BOUND = 20.0  # |b| search range of the yes/no offset (logits)
YES_ID = "true"  # the yes option's id on yes/no (noul) questions (questions.schema)




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


# ---------------------------------------------------------------- the yes/no offset

def _r(x: float) -> float:
    """Rounded for the metrics file, without a negative zero."""
    return round(float(x), 6) + 0.0


def _yes_index(q: dict) -> int | None:
    """The yes option's position on a yes/no question, None on any other."""
    if q["task"] != "noul":
        return None
    return [o["id"] for o in q["options"]].index(YES_ID)


def yes_margins(logits: Sequence[np.ndarray], questions: Sequence[dict],
                temps: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(yes minus no logit after the task's temperature, 1 where the gold is yes) over the yes/no items."""
    delta, y = [], []
    for lg, q in zip(logits, questions):
        k = _yes_index(q)
        if k is None or lg is None:
            continue
        z = np.asarray(lg, dtype=float) / temps.get(q["task"], 1.0)
        delta.append(z[k] - z[1 - k])
        y.append(float(q["gold"] == YES_ID))
    return np.array(delta, dtype=float), np.array(y, dtype=float)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # stable for any x


def fit_offsets(delta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The NLL-optimal offset b per row of ``delta``/``y`` (2-D: one fit per bootstrap row, or 1-D).

    The NLL of P(yes) = sigmoid(delta + b) is convex in b and its derivative, sum(sigmoid(delta + b) - y),
    increases with b, so bisection on [-OFFSET_BOUND, OFFSET_BOUND] finds the unique root (the fitted
    offset makes the mean P(yes) equal the share of yes answers). 100 halvings: exact to float precision.
    """
    d2, y2 = np.atleast_2d(delta), np.atleast_2d(y)
    lo, hi = np.full(d2.shape[0], -OFFSET_BOUND), np.full(d2.shape[0], OFFSET_BOUND)
    target = y2.sum(axis=1)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        over = _sigmoid(d2 + mid[:, None]).sum(axis=1) > target
        hi, lo = np.where(over, mid, hi), np.where(over, lo, mid)
    return 0.5 * (lo + hi)


def _binary_nll(delta: np.ndarray, y: np.ndarray, b: float) -> np.ndarray:
    """Per-item -log P(gold) with P(yes) = sigmoid(delta + b)."""
    return np.logaddexp(0.0, -(2.0 * y - 1.0) * (delta + b))


def offset_rule(delta: np.ndarray, y: np.ndarray, mode: str, alpha: float) -> tuple[float, float, float, float, bool]:
    """(fitted b, kept b, LR deviance 2(NLL(0) - NLL(b)) summed over items, its chi-square(1) p, at the bound)."""
    if delta.size == 0:
        return 0.0, 0.0, 0.0, 1.0, False
    b = float(fit_offsets(delta, y)[0])
    deviance = float(2.0 * (_binary_nll(delta, y, 0.0).sum() - _binary_nll(delta, y, b).sum()))
    p_value = float(math.erfc(math.sqrt(max(deviance, 0.0) / 2.0)))
    at_bound = abs(b) >= OFFSET_BOUND * 0.999
    keep = not at_bound and (mode == "fitted" or (mode == "tested" and p_value < alpha))
    return b, (b if keep else 0.0), deviance, p_value, at_bound


def fit_yes_offset(logits: Sequence[np.ndarray], questions: Sequence[dict], temps: dict[str, float],
                   mode: str, alpha: float, n_boot: int, seed: int) -> dict:
    """The offset on the yes/no items, its likelihood-ratio test against 0, a bootstrap CI and the kept value.

    ``kept`` is what evaluation applies: the fit (fitted), the fit where p < alpha (tested) or 0 (off);
    never a fit at the search bound (all gold answers alike: the NLL falls forever). ``yes_bias`` is mean
    P(yes) minus the share of yes answers at the temperature alone, ``yes_bias_after`` with the kept offset.
    """
    if mode not in OFFSET_MODES:
        raise PipelineError(f"calibrate.yes_offset: {mode!r} is not one of {', '.join(OFFSET_MODES)}")
    delta, y = yes_margins(logits, questions, temps)
    n = int(delta.size)
    if n == 0:
        return {"mode": mode, "n": 0, "offset": None, "kept": 0.0, "deviance": None, "p_value": None,
                "ci_low": None, "ci_high": None, "at_bound": False, "yes_share": None, "yes_bias": None,
                "yes_bias_after": None}
    b, kept, deviance, p_value, at_bound = offset_rule(delta, y, mode, alpha)
    idx = make_rng(seed, "calibrate_yes_offset").integers(0, n, size=(n_boot, n))
    boots = fit_offsets(delta[idx], y[idx])
    ci_low, ci_high = np.percentile(boots, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return {"mode": mode, "n": n, "offset": _r(b), "kept": _r(kept), "deviance": _r(deviance),
            "p_value": _r(p_value), "ci_low": _r(ci_low), "ci_high": _r(ci_high),
            "at_bound": bool(at_bound), "yes_share": _r(y.mean()),
            "yes_bias": _r((_sigmoid(delta) - y).mean()),
            "yes_bias_after": _r((_sigmoid(delta + _r(kept)) - y).mean())}


def apply_yes_offset(logits: Sequence[np.ndarray | None], questions: Sequence[dict], temps: dict[str, float],
                     offset: float) -> list[np.ndarray | None]:
    """Logits whose softmax at the task's temperature carries the yes/no offset (evaluation's one call).

    The yes logit of each yes/no item gains offset x T, so softmax(z' / T) = softmax(z / T + offset at yes):
    every reader that divides by the per-task temperature gets the calibrated probabilities unchanged.
    Other items (and a missing post-chain readout, None) pass through.
    """
    out: list[np.ndarray | None] = []
    for lg, q in zip(logits, questions):
        k = _yes_index(q)
        if lg is None or k is None or offset == 0.0:
            out.append(None if lg is None else np.asarray(lg, dtype=float))
            continue
        z = np.array(lg, dtype=float)
        z[k] += offset * temps.get(q["task"], 1.0)
        out.append(z)
    return out


def read_yes_offset(path: str) -> dict[str, float]:
    """calibrate's ``yes_offset.json``: {"readout": b, "post_chain": b}, each finite, or one line naming the file."""
    import json
    from pathlib import Path
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PipelineError(f"{path}: unreadable yes/no offset file ({type(e).__name__}); rerun calibrate") from None
    if not isinstance(data, dict) or set(data) != {"readout", "post_chain"} or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in data.values()):
        raise PipelineError(f"{path}: expected {{\"readout\": b, \"post_chain\": b}} with finite offsets; rerun calibrate")
    return {k: float(v) for k, v in data.items()}


# ---------------------------------------------------------------- hypotheses H1-H4

CLAIMS = {
    "H1": "temperature scaling (the per-task temperatures this stage keeps) lowers NLL on held-out items",
    "H2": "per-task temperatures lower held-out NLL more than one global temperature",
    "H3": "the post-chain readout is better calibrated (lower ECE) than the fast readout",
    "H4": "the yes/no offset removes the readout's yes-bias on held-out yes/no items",
}
STATISTICS = {
    "H1": "mean per-item NLL, kept temperatures minus T = 1 (nats)",
    "H2": "mean per-item NLL, fitted per-task minus fitted global temperature (nats)",
    "H3": "ECE of the post-chain readout minus ECE of the readout, each calibrated as deployed",
    "H4": "|yes-bias| with the fitted offset minus |yes-bias| without it (yes-bias = mean P(yes) - yes share)",
}


def _probs(lg: np.ndarray, q: dict, temps: dict[str, float], offset: float) -> np.ndarray:
    z = np.asarray(lg, dtype=float) / temps.get(q["task"], 1.0)
    k = _yes_index(q)
    if k is not None:
        z[k] += offset
    z = np.exp(z - z.max())
    return z / z.sum()


def _nll(lg: np.ndarray, q: dict, temps: dict[str, float], offset: float = 0.0) -> float:
    z = np.asarray(lg, dtype=float) / temps.get(q["task"], 1.0)
    k = _yes_index(q)
    if k is not None:
        z[k] += offset
    m = z.max()
    return float(m + np.log(np.exp(z - m).sum()) - z[gold_index(q)])


def paired_test(stat: Callable[[np.ndarray], float], n: int, n_boot: int, alpha: float, seed: int, name: str) -> dict:
    """A statistic of n paired items, its bootstrap CI at 1 - alpha and two-sided p, and a verdict.

    Every claim here says the statistic is below 0. p is twice the smaller share of resamples on either
    side of 0, so p < alpha exactly when the percentile CI excludes 0. Verdict: ``supported`` (CI below 0),
    ``contradicted`` (CI above 0), ``not detected`` (CI holds 0), ``not tested`` (no items).
    """
    if n == 0:
        return {"value": None, "ci_low": None, "ci_high": None, "p_value": None, "n": 0, "verdict": "not tested"}
    point = stat(np.arange(n))
    idx = make_rng(seed, "calibrate_hypotheses", name).integers(0, n, size=(n_boot, n))
    boots = np.array([stat(row) for row in idx])
    low, high = np.percentile(boots, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    p = min(1.0, 2.0 * min(float((boots <= 0).mean()), float((boots >= 0).mean())))
    verdict = "supported" if high < 0 else "contradicted" if low > 0 else "not detected"
    return {"value": _r(point), "ci_low": _r(low), "ci_high": _r(high),
            "p_value": _r(p), "n": n, "verdict": verdict}


def fold_of(n: int, folds: int, seed: int) -> np.ndarray:
    """Each item's fold: a seeded permutation dealt round-robin (fold sizes differ by at most one)."""
    fold = np.empty(n, dtype=int)
    fold[make_rng(seed, "calibrate_folds").permutation(n)] = np.arange(n) % folds
    return fold


def _cross_fit(logits: Sequence[np.ndarray | None], questions: Sequence[dict], fold: np.ndarray, folds: int,
               p: "CalibrateParams", seed: int) -> dict[str, np.ndarray]:
    """Out-of-fold per-item quantities of one readout (items without logits: NaN / False)."""
    n = len(questions)
    out = {k: np.full(n, np.nan) for k in ("nll_1", "nll_kept", "nll_task", "nll_global", "conf", "p_yes_before",
                                            "p_yes_after")}
    out["correct"] = np.zeros(n, dtype=bool)
    has = np.array([lg is not None for lg in logits])
    for k in range(folds):
        fit = [i for i in range(n) if fold[i] != k and has[i]]
        held = [i for i in range(n) if fold[i] == k and has[i]]
        if not fit or not held:
            continue
        lg_fit, q_fit = [logits[i] for i in fit], [questions[i] for i in fit]
        kept, fitted, _, _ = significant_temperatures(lg_fit, q_fit, p.alpha)
        t_global = round(float(stats.fit_temperature(lg_fit, [gold_index(q) for q in q_fit], lo=LOWER_BOUND,
                                                     hi=UPPER_BOUND)), 6)  # rounded as the per-task fits are
        delta, y = yes_margins(lg_fit, q_fit, kept)
        fitted_offset = offset_rule(delta, y, "fitted", p.alpha)[1]
        deployed = offset_rule(delta, y, p.yes_offset, p.alpha)[1]
        for i in held:
            lg, q = logits[i], questions[i]
            out["nll_1"][i], out["nll_kept"][i] = _nll(lg, q, {}), _nll(lg, q, kept)
            out["nll_task"][i], out["nll_global"][i] = _nll(lg, q, fitted), _nll(lg, q, {q["task"]: t_global})
            probs = _probs(lg, q, kept, deployed)
            out["conf"][i], out["correct"][i] = float(probs.max()), int(probs.argmax()) == gold_index(q)
            yes = _yes_index(q)
            if yes is not None:
                out["p_yes_before"][i] = _probs(lg, q, kept, 0.0)[yes]
                out["p_yes_after"][i] = _probs(lg, q, kept, fitted_offset)[yes]
    return out


def calibration_hypotheses(logits: Sequence[np.ndarray], post_logits: Sequence[np.ndarray | None],
                           questions: Sequence[dict], p: "CalibrateParams", seed: int) -> dict:
    """H1–H4 on the calibration items, cross-fitted over `p.folds` folds (see CLAIMS and STATISTICS).

    H1 tests the temperatures as this stage keeps them, H2 the fitted ones (per task vs one), H3 the
    two readouts as evaluation calibrates them (kept temperatures and the `yes_offset` mode's offset),
    H4 the fitted offset on top of the kept temperature. Each: statistic, CI at 1 - alpha, p, n, verdict.
    """
    n = len(questions)
    if n < p.folds:
        raise PipelineError(f"calibrate.folds: {p.folds} folds need at least as many calibration items, got {n}; "
                            "lower calibrate.folds or raise calibrate.items")
    fold = fold_of(n, p.folds, seed)
    r = _cross_fit(logits, questions, fold, p.folds, p, seed)
    c = _cross_fit(post_logits, questions, fold, p.folds, p, seed)
    scored = np.flatnonzero(~np.isnan(r["nll_1"]))
    both = np.flatnonzero(~np.isnan(r["conf"]) & ~np.isnan(c["conf"]))
    yes_no = np.flatnonzero(~np.isnan(r["p_yes_before"]))
    y = np.array([float(q["gold"] == YES_ID) for q in questions])
    ece = lambda part, rows: stats.ece(part["conf"][rows], part["correct"][rows], p.ece_bins)  # noqa: E731
    bias = lambda key, rows: abs(float((r[key][rows] - y[rows]).mean()))  # noqa: E731
    tests = {
        "H1": (lambda s: float((r["nll_kept"][scored[s]] - r["nll_1"][scored[s]]).mean()), len(scored)),
        "H2": (lambda s: float((r["nll_task"][scored[s]] - r["nll_global"][scored[s]]).mean()), len(scored)),
        "H3": (lambda s: ece(c, both[s]) - ece(r, both[s]), len(both)),
        "H4": (lambda s: bias("p_yes_after", yes_no[s]) - bias("p_yes_before", yes_no[s]), len(yes_no)),
    }
    out: dict = {"folds": p.folds, "bootstrap": p.bootstrap, "confidence": round(1 - p.alpha, 6)}
    for name, (stat, size) in tests.items():
        out[name] = {"claim": CLAIMS[name], "statistic": STATISTICS[name],
                     **paired_test(stat, size, p.bootstrap, p.alpha, seed, name)}
    for key in ("before", "after"):  # the signed biases behind H4's statistic
        out["H4"][f"yes_bias_{key}"] = _r((r[f"p_yes_{key}"][yes_no] - y[yes_no]).mean()) \
            if len(yes_no) else None
    return out


def calibrate_answers(logits: Sequence[np.ndarray], chains: Sequence[dict], questions: Sequence[dict],
                      p: CalibrateParams, seed: int) -> tuple[dict, dict, dict]:
    """Temperatures and yes/no offsets for the readout and the post-chain readout, and the report behind them.

    Returns (temperatures {"readout": {...}, "post_chain": {...}}, offsets {"readout": b, "post_chain": b},
    report). Everything is fitted on these calibration items only; the hypotheses cross-fit them.
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
    offsets = {}
    for name, lg, qs in (("readout", logits, questions), ("post_chain", post_logits, post_questions)):
        fit = fit_yes_offset(lg, qs, temps[name], p.yes_offset, p.alpha, p.bootstrap, seed)
        offsets[name] = fit["kept"]
        report[name]["yes_offset"] = fit
        # temperatures and the kept offset together: what evaluation applies (in-sample here)
        report[name]["after_offset"] = readout_summary(apply_yes_offset(lg, qs, temps[name], fit["kept"]), qs,
                                                       temps[name], p.ece_bins) if qs else None
    report["hypotheses"] = calibration_hypotheses(logits, [c["post_logits"] for c in chains], questions, p, seed)
    return temps, offsets, report
