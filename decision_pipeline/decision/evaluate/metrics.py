"""Decision-model metrics: one per-item table, then every headline number from it.

All summaries derive from `item_table`, so readout, thinking, post-chain,
routing and baseline comparisons score the very same items the same way (None
answers count as wrong everywhere). Scoring primitives come from
`decision_pipeline.common.stats`; this module only arranges them. Outputs are JSON-ready:
floats rounded to 6 decimals, None where a number is undefined (never NaN).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from decision_pipeline.common import stats
from decision_pipeline.questions.schema import gold_index

Table = dict[str, np.ndarray]
Curve = list[dict]
DEFAULT_FRACTIONS = np.linspace(0.0, 1.0, 21)


def _r(x: Any) -> float | None:
    """Round for JSON; None/NaN/inf become None so files never hold NaN."""
    if x is None:
        return None
    x = float(x)
    return round(x, 6) if math.isfinite(x) else None


def _share(mask: np.ndarray) -> float | None:
    """Mean of a boolean vector, None when it is empty (a rate over no items is undefined)."""
    return _r(np.mean(mask)) if mask.size else None


def _objects(values: Sequence[Any]) -> np.ndarray:
    """1-D object array (np.array would turn equal-length rows into a 2-D matrix)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


# ------------------------------------------------------------------- table
def item_table(questions: Sequence[dict], readout_logits: Sequence[np.ndarray],
               thinking_preds: Sequence[int | None], chain_tokens: Sequence[int],
               finish_reasons: Sequence[str], post_logits: Sequence[np.ndarray | None],
               temps: dict[str, float] | None = None, post_temps: dict[str, float] | None = None) -> Table:
    """Per-item arrays that every other function here reads.

    Readout probabilities use the per-task temperature (missing task -> 1.0),
    matching `evaluate.readout_summary`. Missing answers are encoded as -1 /
    False rather than dropped, so all rates share one denominator (all items).
    """
    n = len(questions)
    for name, seq in (("readout_logits", readout_logits), ("thinking_preds", thinking_preds),
                      ("chain_tokens", chain_tokens), ("finish_reasons", finish_reasons),
                      ("post_logits", post_logits)):
        if len(seq) != n:
            raise ValueError(f"length mismatch: questions has {n} items but {name} has {len(seq)}")
    if n == 0:
        raise ValueError("questions is empty; need at least one item")
    temps, post_temps = temps or {}, post_temps or {}
    gold = np.array([gold_index(q) for q in questions], dtype=int)
    probs = [np.asarray(stats.softmax_with_temperature(np.asarray(lg, dtype=float), temps.get(q["task"], 1.0)))
             for lg, q in zip(readout_logits, questions)]
    for i, (p, q) in enumerate(zip(probs, questions)):
        if p.size != len(q["options"]):
            raise ValueError(f"readout_logits[{i}] has {p.size} values but question {q['id']!r} "
                             f"has {len(q['options'])} options")
    r_pred = np.array([int(np.argmax(p)) for p in probs], dtype=int)
    t_pred = np.array([-1 if t is None else int(t) for t in thinking_preds], dtype=int)
    post_pred = np.full(n, -1, dtype=int)
    post_conf = np.full(n, np.nan)
    for i, (lg, q) in enumerate(zip(post_logits, questions)):
        if lg is not None:
            pp = np.asarray(stats.softmax_with_temperature(np.asarray(lg, dtype=float),
                                                           post_temps.get(q["task"], 1.0)))
            post_pred[i], post_conf[i] = int(np.argmax(pp)), float(np.max(pp))
    has_post = post_pred >= 0
    return {
        "id": np.array([str(q["id"]) for q in questions], dtype=object),
        "gold": gold,
        "readout_probs": _objects(probs),
        "readout_pred": r_pred,
        "readout_correct": r_pred == gold,
        "margin": np.asarray(stats.margin(probs), dtype=float),
        "confidence": np.array([float(np.max(p)) for p in probs]),
        "thinking_pred": t_pred,
        "thinking_correct": (t_pred >= 0) & (t_pred == gold),
        "parsed": t_pred >= 0,
        "post_pred": post_pred,
        "post_correct": has_post & (post_pred == gold),
        "has_post": has_post,
        "post_confidence": post_conf,
        "chain_tokens": np.array([int(c) for c in chain_tokens], dtype=int),
        "unfinished": np.array([f == "length" for f in finish_reasons], dtype=bool),
        "task": np.array([str(q["task"]) for q in questions], dtype=object),
        "family": np.array([str(q.get("family", "")) for q in questions], dtype=object),
        "level": np.array([int(q.get("level", 0)) for q in questions], dtype=int),
    }


def subset(table: Table, mask: np.ndarray) -> Table:
    """Rows of the table where mask is true (e.g. one task)."""
    return {k: v[mask] for k, v in table.items()}


# ----------------------------------------------------------------- headline
def _core(t: Table, n_bins: int) -> dict:
    parsed, both = t["parsed"], t["parsed"] & t["has_post"]
    disagree = t["readout_pred"][parsed] != t["thinking_pred"][parsed]
    auc = stats.auroc(-t["margin"][parsed], disagree) if parsed.any() else None
    gold, probs = t["gold"], list(t["readout_probs"])
    return {
        "n": int(gold.size),
        "readout": {"accuracy": _r(np.mean(t["readout_correct"])), "nll": _r(stats.nll(probs, gold)),
                    "brier": _r(stats.brier(probs, gold)),
                    "ece": _r(stats.ece(t["confidence"], t["readout_correct"], n_bins))},
        "thinking": {"accuracy": _r(np.mean(t["thinking_correct"])), "parse_rate": _r(np.mean(parsed))},
        "post_chain": {"accuracy": _r(np.mean(t["post_correct"])), "coverage": _r(np.mean(t["has_post"]))},
        "agreement": {"readout_thinking": _share(~disagree),
                      "letter_post_chain": _share(t["thinking_pred"][both] == t["post_pred"][both])},
        "disagreement_auroc": _r(auc),
        "median_chain_tokens": _r(np.median(t["chain_tokens"])),
        "loops": {"rate": _r(np.mean(t["unfinished"])), "n": int(t["unfinished"].sum())},
    }


def headline(table: Table, n_bins: int = 10) -> dict:
    """The numbers a review reads first, overall and per task.

    Agreement rates use only items where both answers exist (parsed; parsed and
    post-chain present) and are None when there are none. `disagreement_auroc`
    asks whether a low readout margin flags items where thinking would answer
    differently (score = -margin): 0.5 is no signal, None if all agree or all differ.
    """
    out = _core(table, n_bins)
    out["by_task"] = {task: _core(subset(table, table["task"] == task), n_bins)
                      for task in sorted(set(table["task"].tolist()))}
    return out


def reliability(table: Table, n_bins: int = 10) -> dict:
    """Readout reliability bins in JSON form (input for `plots.plot_reliability`)."""
    return stats.reliability_bins(table["confidence"], table["readout_correct"], n_bins).to_dict()


# ------------------------------------------------------------------ routing
def _n_routed(f: float, n: int) -> int:
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"routing fraction must lie in [0, 1], got {f}")
    return min(n, int(math.floor(f * n + 0.5 + 1e-9)))  # round half up; epsilon absorbs f*n float error


def _routed_correct(table: Table, f: float) -> tuple[np.ndarray, np.ndarray]:
    """(per-item correctness, routed mask) when the lowest-margin share f goes to thinking."""
    n = table["margin"].size
    order = np.argsort(table["margin"], kind="stable")  # stable: ties keep item-index order
    routed = np.zeros(n, dtype=bool)
    routed[order[:_n_routed(f, n)]] = True
    return np.where(routed, table["thinking_correct"], table["readout_correct"]), routed


def routing_curve(table: Table, fractions: Sequence[float] | np.ndarray = DEFAULT_FRACTIONS) -> Curve:
    """Accuracy and thinking cost when only the least confident readouts think.

    The routed count is round-half-up(f * n). Thinking tokens are averaged over
    ALL items (unrouted items cost zero), i.e. the per-question budget. Each row
    repeats readout-only and thinking-only accuracy so a curve is self-contained.
    """
    n = table["margin"].size
    r_acc, t_acc = _r(np.mean(table["readout_correct"])), _r(np.mean(table["thinking_correct"]))
    rows = []
    for f in fractions:
        correct, routed = _routed_correct(table, float(f))
        rows.append({"fraction": _r(f), "n_routed": int(routed.sum()), "accuracy": _r(np.mean(correct)),
                     "mean_thinking_tokens": _r(table["chain_tokens"][routed].sum() / n),
                     "readout_accuracy": r_acc, "thinking_accuracy": t_acc})
    return rows


def gap_recovered(curve_or_table: Union[Curve, Table], f: float = 0.3) -> float | None:
    """Share of the readout->thinking accuracy gap recovered by routing fraction f.

    (routed_acc(f) - readout_acc) / (thinking_acc - readout_acc), reported as is:
    it is negative when routing hurts, above 1 when routing beats thinking on
    every item (possible because readout is kept where it is right), and None
    when thinking is not more accurate than the readout: there is no gap to
    recover, and the ratio of two negatives would read as a recovery when
    routing in fact cost accuracy (evaluate reports `accuracy_change_at_30`). A curve
    must hold a row at fraction f; a table is routed at f directly.
    """
    if isinstance(curve_or_table, dict):
        row = routing_curve(curve_or_table, [f])[0]
    else:
        hits = [r for r in curve_or_table if math.isclose(r["fraction"], f, abs_tol=1e-6)]
        if not hits:
            raise ValueError(f"routing curve has no row at fraction {f}; "
                             f"fractions are {[r['fraction'] for r in curve_or_table]}")
        row = hits[0]
    gap = row["thinking_accuracy"] - row["readout_accuracy"]
    if gap < 1e-12:
        return None
    return _r((row["accuracy"] - row["readout_accuracy"]) / gap)


# ---------------------------------------------------------------- intervals
def _ci(point_low_high: tuple[float, float, float]) -> dict:
    point, low, high = point_low_high
    return {"point": _r(point), "ci_low": _r(low), "ci_high": _r(high)}


def headline_cis(table: Table, n_resamples: int = 1000, seed: int = 0, route_fraction: float = 0.3) -> dict:
    """Percentile-bootstrap 95% intervals for the headline accuracies.

    The routed set is chosen once on the full data and held fixed while items
    are resampled: the interval covers item sampling, not re-choosing the threshold.
    """
    routed, _ = _routed_correct(table, route_fraction)
    vectors = {"readout_accuracy": table["readout_correct"], "thinking_accuracy": table["thinking_correct"],
               "post_chain_accuracy": table["post_correct"], f"routed_accuracy_at_{route_fraction:g}": routed}
    out: dict[str, Any] = {k: _ci(stats.bootstrap_ci(v.astype(float), n_resamples=n_resamples, seed=seed))
                           for k, v in vectors.items()}
    out.update(confidence=0.95, n_resamples=int(n_resamples), n=int(table["gold"].size))
    return out


def _align(table_model: Table, table_base: Table) -> np.ndarray:
    """Index into table_base for each model item; both tables must hold exactly the same ids."""
    ids_m, ids_b = table_model["id"].tolist(), table_base["id"].tolist()
    for name, ids in (("model", ids_m), ("baseline", ids_b)):
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"{name} table has duplicate item id {dup!r}")
    pos = {i: k for k, i in enumerate(ids_b)}
    missing = [i for i in ids_m if i not in pos]
    if missing:
        raise ValueError(f"item id {missing[0]!r} is in the model table but not the baseline "
                         f"({len(missing)} missing)")
    extra = sorted(set(ids_b) - set(ids_m))
    if extra:
        raise ValueError(f"item id {extra[0]!r} is in the baseline table but not the model ({len(extra)} missing)")
    return np.array([pos[i] for i in ids_m], dtype=int)


def vs_baseline(table_model: Table, table_base: Table, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Model minus baseline accuracy with paired-bootstrap 95% intervals over the same items.

    Pairing by item id removes shared item difficulty from the interval; a
    comparison over different item sets would be meaningless, so it raises.
    """
    idx = _align(table_model, table_base)
    out: dict[str, Any] = {"n": int(idx.size)}
    for key, col in (("readout_accuracy", "readout_correct"), ("thinking_accuracy", "thinking_correct"),
                     ("post_chain_accuracy", "post_correct"), ("unfinished_rate", "unfinished"),
                     ("mean_chain_tokens", "chain_tokens")):
        d, lo, hi = stats.paired_bootstrap_diff(table_model[col].astype(float), table_base[col][idx].astype(float),
                                                n_resamples=n_resamples, seed=seed)
        out[key] = {"diff": _r(d), "ci_low": _r(lo), "ci_high": _r(hi), "model": _r(np.mean(table_model[col])),
                    "baseline": _r(np.mean(table_base[col][idx]))}
    out["median_chain_tokens"] = {"model": _r(np.median(table_model["chain_tokens"])),
                                  "baseline": _r(np.median(table_base["chain_tokens"][idx]))}
    # the paired table behind each accuracy difference: items only one of the two got right
    out["paired_counts"] = {key: {"model_only": int((table_model[col] & ~table_base[col][idx]).sum()),
                                  "baseline_only": int((~table_model[col] & table_base[col][idx]).sum())}
                            for key, col in (("readout", "readout_correct"), ("thinking", "thinking_correct"))}
    out.update(thinking_parts(table_model, table_base, idx, n_resamples, seed))
    # where a gain comes from: the readout difference per question family, each with its own paired CI
    families = table_model["family"]
    out["by_family"] = {}
    for fam in sorted(set(families.tolist())):
        m = families == fam
        d, lo, hi = stats.paired_bootstrap_diff(table_model["readout_correct"][m].astype(float),
                                                table_base["readout_correct"][idx][m].astype(float),
                                                n_resamples=n_resamples, seed=seed)
        out["by_family"][str(fam)] = {"n": int(m.sum()), "model": _r(np.mean(table_model["readout_correct"][m])),
                                      "baseline": _r(np.mean(table_base["readout_correct"][idx][m])),
                                      "diff": _r(d), "ci_low": _r(lo), "ci_high": _r(hi)}
    return out


def _ratio_diff(num_m: np.ndarray, den_m: np.ndarray, num_b: np.ndarray, den_b: np.ndarray, n_resamples: int,
                seed: int) -> tuple[float | None, float | None, float | None]:
    """sum(num_m)/sum(den_m) − sum(num_b)/sum(den_b), resampling the same items for both (a paired
    bootstrap of a ratio); resamples where a denominator is empty are left out, an undefined point is None."""
    if not den_m.any() or not den_b.any():
        return None, None, None
    point = num_m.sum() / den_m.sum() - num_b.sum() / den_b.sum()
    idx = np.random.default_rng(seed).integers(0, num_m.size, size=(n_resamples, num_m.size))
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = (num_m[idx].sum(1) / den_m[idx].sum(1)) - (num_b[idx].sum(1) / den_b[idx].sum(1))
    diffs = diffs[np.isfinite(diffs)]
    if not diffs.size:
        return float(point), None, None
    low, high = np.quantile(diffs, [0.025, 0.975])
    return float(point), float(low), float(high)


def thinking_parts(table_model: Table, table_base: Table, idx: np.ndarray, n_resamples: int = 2000,
                   seed: int = 0) -> dict:
    """A thinking-accuracy change split into answering more often and answering better (issue 50).

    Thinking accuracy = parse rate x right-when-answered (right among the chains with a parsed answer),
    so with p the parse rate and r the right-when-answered share, exactly
    Δacc = Δp · r_before + p_after · Δr: `parse_part` is what answering more (or less) often moved,
    `right_part` what answering better (or worse) moved. Each factor's paired difference has its own
    bootstrap CI. A side without a parsed answer has no r: it is taken as the other side's, so the whole
    change is the parse part (p = 0 contributes nothing either way)."""
    pm, pb = table_model["parsed"].astype(float), table_base["parsed"][idx].astype(float)
    cm, cb = table_model["thinking_correct"].astype(float), table_base["thinking_correct"][idx].astype(float)
    d, lo, hi = stats.paired_bootstrap_diff(pm, pb, n_resamples=n_resamples, seed=seed)
    parse = {"diff": _r(d), "ci_low": _r(lo), "ci_high": _r(hi), "model": _r(pm.mean()), "baseline": _r(pb.mean())}
    r_m = cm.sum() / pm.sum() if pm.any() else None
    r_b = cb.sum() / pb.sum() if pb.any() else None
    rd, rlo, rhi = _ratio_diff(cm, pm, cb, pb, n_resamples, seed)
    right = {"diff": _r(rd), "ci_low": _r(rlo), "ci_high": _r(rhi), "model": _r(r_m), "baseline": _r(r_b),
             "n_model": int(pm.sum()), "n_baseline": int(pb.sum())}
    r_b_ = r_b if r_b is not None else (r_m if r_m is not None else 0.0)
    r_m_ = r_m if r_m is not None else r_b_
    p_m, p_b = float(pm.mean()), float(pb.mean())
    parts = {"parse_part": _r((p_m - p_b) * r_b_), "right_part": _r(p_m * (r_m_ - r_b_)),
             "total": _r(cm.mean() - cb.mean()),
             "rule": "thinking accuracy = parse rate x right-when-answered; total = parse_part + right_part, "
                     "parse_part = (parse_after - parse_before) x right_before, right_part = parse_after x "
                     "(right_after - right_before)"}
    return {"thinking_parse_rate": parse, "thinking_right_when_answered": right, "thinking_decomposition": parts}


# --------------------------------------------------------------------- grid
def accuracy_grid(table: Table) -> list[dict]:
    """Readout and thinking accuracy per (family, level) cell, sorted, for the heatmap."""
    keys = sorted(set(zip(table["family"].tolist(), table["level"].tolist())))
    rows = []
    for fam, lvl in keys:
        m = (table["family"] == fam) & (table["level"] == lvl)
        rows.append({"family": fam, "level": int(lvl), "readout_accuracy": _r(np.mean(table["readout_correct"][m])),
                     "thinking_accuracy": _r(np.mean(table["thinking_correct"][m])), "n": int(m.sum())})
    return rows


def ece_change(calibrated: Table, raw: Table, n_bins: int = 10, n_resamples: int = 1000, seed: int = 0) -> dict:
    """ECE(calibrated) − ECE(T=1) on the same items, with a paired percentile-bootstrap 95% CI.

    Says whether temperature scaling changed held-out calibration by more than
    the ECE's own sampling noise (10 bins over a few hundred items move by ~0.01).
    """
    corr = raw["readout_correct"]
    cal_conf, raw_conf = calibrated["confidence"], raw["confidence"]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_resamples):
        idx = rng.integers(0, corr.size, corr.size)
        diffs.append(stats.ece(cal_conf[idx], corr[idx], n_bins) - stats.ece(raw_conf[idx], corr[idx], n_bins))
    low, high = np.percentile(diffs, [2.5, 97.5])
    diff = stats.ece(cal_conf, corr, n_bins) - stats.ece(raw_conf, corr, n_bins)
    return {"diff": _r(diff), "ci_low": _r(low), "ci_high": _r(high)}


def gate(comparison: dict, table_base: Table, n_resamples: int = 1000, seed: int = 0) -> dict:
    """Did a later training stage keep what it must? The unfinished/loop rate did not rise (`unfinished_fell`
    says whether it fell: impossible when the baseline has none), the readout stayed inside the baseline's
    95% CI, and thinking did not get worse (its paired CI reaches zero or above)."""
    low, high = stats.bootstrap_ci(table_base["readout_correct"].astype(float), n_resamples=n_resamples, seed=seed)[1:]
    readout = comparison["readout_accuracy"]["model"]
    unfinished, thinking = comparison["unfinished_rate"], comparison["thinking_accuracy"]
    out = {"unfinished_fell": bool(unfinished["diff"] < 0), "unfinished_not_worse": bool(unfinished["diff"] <= 0),
           "unfinished_diff": unfinished["diff"],
           "readout_inside_baseline_ci": bool(low <= readout <= high), "baseline_readout_ci": [_r(low), _r(high)],
           "thinking_not_worse": bool(thinking["ci_high"] >= 0),
           "thinking_gain_significant": bool(thinking["ci_low"] > 0)}
    out["passed"] = out["unfinished_not_worse"] and out["readout_inside_baseline_ci"] and out["thinking_not_worse"]
    return out
