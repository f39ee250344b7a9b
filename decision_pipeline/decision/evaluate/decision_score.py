"""Decision Score: how much better the readout's probabilities are than knowing only the label prior.

A raw Brier or RPS mixes model quality with how hard the label distribution is; dividing by the
score of the label prior (the share of each option position among the gold answers) gives a skill
score, 1 − score/prior_score: 0 = no better than guessing the prior, 1 = perfect, < 0 = worse than
the prior. The prior is a base rate per (question family, option count) fitted on the calibration
split (`fit_label_prior`), never on the items it scores: a prior counted on the scored items would be
their best constant forecast in hindsight, fitted on the very labels it is judged against. A cell the
calibration split lacks gets the uniform 1/K forecast (counted as `prior.fallback_items`). ECE rides
along. Every number carries a percentile item-bootstrap 95% CI (the prior held fixed, the items resampled).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from decision_pipeline.common import stats
from decision_pipeline.questions.schema import gold_index

Table = dict[str, np.ndarray]


def _r(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return round(x, 6) if math.isfinite(x) else None


def brier_rows(probs: Sequence[np.ndarray], gold: np.ndarray) -> np.ndarray:
    """Per-item multiclass Brier, sum over options of (p_k − 1[k=gold])² (the 0..2 convention of stats.brier)."""
    out = np.empty(len(probs))
    for i, (p, g) in enumerate(zip(probs, gold)):
        o = np.zeros(len(p))
        o[int(g)] = 1.0
        out[i] = float(np.sum((np.asarray(p, dtype=float) - o) ** 2))
    return out


def rps_rows(probs: Sequence[np.ndarray], gold: np.ndarray) -> np.ndarray:
    """Per-item ranked probability score over the options in their stated order.

    RPS = Σ_{k<K} (CDF_p(k) − CDF_o(k))² / (K − 1); it charges more for mass far from the gold
    option than near it. A one-option item scores 0.
    """
    out = np.empty(len(probs))
    for i, (p, g) in enumerate(zip(probs, gold)):
        p = np.asarray(p, dtype=float)
        k = p.size
        if k < 2:
            out[i] = 0.0
            continue
        o = np.zeros(k)
        o[int(g)] = 1.0
        d = np.cumsum(p)[:-1] - np.cumsum(o)[:-1]
        out[i] = float(np.sum(d ** 2) / (k - 1))
    return out


PriorCells = dict[tuple[str, int], np.ndarray]


def fit_label_prior(questions: Sequence[Mapping[str, Any]]) -> PriorCells:
    """The base rate of each option position as gold per (family, option count) over `questions`
    (the calibration split: labels the scored model is never judged on)."""
    counts: PriorCells = {}
    for q in questions:
        key = (str(q.get("family", "")), len(q["options"]))
        counts.setdefault(key, np.zeros(key[1]))[gold_index(q)] += 1
    return {k: v / v.sum() for k, v in sorted(counts.items())}


def priors_for(families: np.ndarray, n_options: np.ndarray, cells: PriorCells) -> tuple[list[np.ndarray], int]:
    """Per scored item its cell's fitted prior, or the uniform 1/K where the fit has no such cell;
    returns (priors, how many items fell back)."""
    out, fallback = [], 0
    for fam, k in zip(families.tolist(), n_options.tolist()):
        prior = cells.get((str(fam), int(k)))
        if prior is None:
            prior, fallback = np.full(int(k), 1.0 / int(k)), fallback + 1
        out.append(prior)
    return out, fallback


def _skill(score: np.ndarray, prior_score: np.ndarray) -> float | None:
    ref = float(np.mean(prior_score))
    return None if ref <= 1e-12 else 1.0 - float(np.mean(score)) / ref


def _scores(t: Table, prior: list[np.ndarray], n_bins: int) -> dict[str, np.ndarray]:
    probs, gold = list(t["readout_probs"]), t["gold"]
    return {"brier": brier_rows(probs, gold), "prior_brier": brier_rows(prior, gold),
            "rps": rps_rows(probs, gold), "prior_rps": rps_rows(prior, gold)}


def _point(s: dict[str, np.ndarray], conf: np.ndarray, corr: np.ndarray, n_bins: int) -> dict[str, float | None]:
    return {"brier_skill": _skill(s["brier"], s["prior_brier"]), "rps_skill": _skill(s["rps"], s["prior_rps"]),
            "ece": stats.ece(conf, corr, n_bins)}


def decision_score_of(t: Table, prior: list[np.ndarray], n_bins: int = 10, n_resamples: int = 1000,
                      seed: int = 0) -> dict:
    """Brier and RPS skill against `prior` and ECE over the items of `t`, each with a bootstrap CI."""
    s = _scores(t, prior, n_bins)
    conf, corr = t["confidence"], t["readout_correct"]
    point = _point(s, conf, corr, n_bins)
    rng = np.random.default_rng(seed)
    n = corr.size
    draws: dict[str, list[float]] = {k: [] for k in point}
    for _ in range(n_resamples):
        idx = rng.integers(0, n, n)
        for k, v in _point({a: b[idx] for a, b in s.items()}, conf[idx], corr[idx], n_bins).items():
            if v is not None:
                draws[k].append(v)
    out: dict[str, Any] = {"n": int(n)}
    for k, v in point.items():
        lo, hi = (np.percentile(draws[k], [2.5, 97.5]) if draws[k] else (None, None))
        out[k] = {"point": _r(v), "ci_low": _r(lo), "ci_high": _r(hi)}
    out.update(brier=_r(np.mean(s["brier"])), prior_brier=_r(np.mean(s["prior_brier"])),
               rps=_r(np.mean(s["rps"])), prior_rps=_r(np.mean(s["prior_rps"])))
    return out


def decision_score(table: Table, prior_cells: PriorCells, prior_split: str, prior_items: int, n_bins: int = 10,
                   n_resamples: int = 1000, seed: int = 0) -> dict:
    """The Decision Score overall and per question family, against `prior_cells` (`fit_label_prior` on the
    `prior_items` questions of split `prior_split`); `prior` in the result records where the prior came from."""
    n_opt = np.array([len(p) for p in table["readout_probs"]], dtype=int)
    prior, fallback = priors_for(table["family"], n_opt, prior_cells)
    out = decision_score_of(table, prior, n_bins, n_resamples, seed)
    out["prior"] = {"rule": "share of each option position as gold per (family, option count), fitted on the "
                            f"{prior_split} split; uniform 1/K for a cell it lacks",
                    "split": prior_split, "items": int(prior_items), "fallback_items": int(fallback),
                    "cells": {f"{fam}/{k}": [_r(x) for x in v] for (fam, k), v in prior_cells.items()}}
    out["confidence"] = 0.95
    out["by_family"] = {}
    for fam in sorted(set(table["family"].tolist())):
        m = table["family"] == fam
        sub = {k: v[m] for k, v in table.items()}
        out["by_family"][str(fam)] = decision_score_of(sub, [prior[i] for i in np.flatnonzero(m)],
                                                       n_bins, n_resamples, seed)
    return out
