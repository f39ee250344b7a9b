"""Learned router: P(thinking fixes the readout) from cheap features, beside plain margin routing.

Why: margin routing sends the least confident readouts to thinking, but thinking only pays where it
is right and the readout wrong ("fixable"). A logistic regression on the readout margin, its
entropy, the question family (one-hot) and the family's chain-length prior (mean chain tokens on the
fit items) estimates that chance directly. It is fit on the calibration split (calibrate stage,
`router.json`) and scored on the eval split (evaluate stage), where both routers' fixable AUROC and
routed accuracy at the same share are reported side by side. L2-penalised (scipy L-BFGS), so a
family with one outcome only does not send its coefficient to infinity.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.optimize import minimize

from decision_pipeline.common import stats
from decision_pipeline.common.errors import PipelineError

Table = dict[str, np.ndarray]
L2 = 1.0


def entropy(table: Table) -> np.ndarray:
    """Shannon entropy (nats) of each item's readout probabilities, divided by log(option count)."""
    out = np.empty(len(table["readout_probs"]))
    for i, p in enumerate(table["readout_probs"]):
        p = np.clip(np.asarray(p, dtype=float), 1e-12, 1.0)
        out[i] = float(-(p * np.log(p)).sum() / math.log(p.size)) if p.size > 1 else 0.0
    return out


def fixable(table: Table) -> np.ndarray:
    """Items where thinking answers right and the readout wrong: the only ones routing can win."""
    return table["thinking_correct"] & ~table["readout_correct"]


def _features(table: Table, families: list[str], chain_prior: dict[str, float]) -> tuple[np.ndarray, list[str]]:
    fam = table["family"]
    cols = [np.ones(fam.size), table["margin"], entropy(table),
            np.array([math.log1p(chain_prior.get(str(f), 0.0)) / 10.0 for f in fam])]
    names = ["intercept", "margin", "entropy", "log_chain_prior/10"]
    for f in families:
        cols.append((fam == f).astype(float))
        names.append(f"family={f}")
    return np.column_stack(cols), names


def fit_router(table: Table, where: str = "router") -> dict[str, Any]:
    """Fit on the table's items; fewer items than features is one clear error (the fit would be underdetermined)."""
    families = sorted(set(table["family"].tolist()))
    prior = {f: float(np.mean(table["chain_tokens"][table["family"] == f])) for f in families}
    x, names = _features(table, families, prior)
    y = fixable(table).astype(float)
    if x.shape[0] < x.shape[1]:
        raise PipelineError(f"{where}: {x.shape[0]} items to fit a router with {x.shape[1]} features "
                            f"({', '.join(names)}); raise calibrate.items or use margin routing only")

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ w
        nll = float(np.sum(np.logaddexp(0.0, z) - y * z))
        grad = x.T @ (1.0 / (1.0 + np.exp(-z)) - y)
        pen = w.copy()
        pen[0] = 0.0  # the intercept is not shrunk
        return nll + 0.5 * L2 * float(pen @ pen), grad + L2 * pen

    res = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B")
    return {"features": names, "coef": [round(float(v), 8) for v in res.x], "families": families,
            "chain_prior": {f: round(v, 4) for f, v in prior.items()}, "l2": L2, "n_fit": int(y.size),
            "n_fixable": int(y.sum()), "converged": bool(res.success)}


def router_scores(router: dict[str, Any], table: Table) -> np.ndarray:
    """P(fixable) per item under a fitted router (a family unseen at fit time gets no family term)."""
    x, names = _features(table, router["families"], router["chain_prior"])
    if names != router["features"]:
        raise PipelineError(f"router features {router['features']} do not match {names}; refit (dvc repro calibrate)")
    return 1.0 / (1.0 + np.exp(-(x @ np.asarray(router["coef"], dtype=float))))


def _routed_accuracy(table: Table, priority: np.ndarray, share: float) -> float:
    """Accuracy when the `share` of items with the highest priority think (ties in item order)."""
    n = priority.size
    k = min(n, int(math.floor(share * n + 0.5 + 1e-9)))
    routed = np.zeros(n, dtype=bool)
    routed[np.argsort(-priority, kind="stable")[:k]] = True
    return float(np.mean(np.where(routed, table["thinking_correct"], table["readout_correct"])))


def compare_routers(router: dict[str, Any] | None, table: Table, share: float = 0.3) -> dict[str, Any]:
    """Fixable AUROC and routed accuracy at `share` of margin routing and (when fitted) the learned router."""
    y = fixable(table)
    out: dict[str, Any] = {"share": share, "n": int(y.size), "n_fixable": int(y.sum()),
                           "margin": {"fixable_auroc": _round(stats.auroc(-table["margin"], y)),
                                      "accuracy": _round(_routed_accuracy(table, -table["margin"], share))}}
    if router is None:
        out["learned"] = None
        return out
    s = router_scores(router, table)
    out["learned"] = {"fixable_auroc": _round(stats.auroc(s, y)),
                      "accuracy": _round(_routed_accuracy(table, s, share)), "n_fit": router["n_fit"]}
    return out


def _round(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)
