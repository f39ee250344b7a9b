"""Judge vs humans: Cohen's kappa on accept/reject with a bootstrap CI, its spread over
repeated judge runs, and concordance, on the validation split only.

Why: the same judge prompt swung kappa by ~0.13 between runs in the research, so one
kappa number is not a result; the interval (over reflections) and the spread (over
judge repeats) say how far to trust a prompt revision's gain.
"""
from __future__ import annotations

import numpy as np

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.stats import cohen_kappa

LABELS = ("accept", "reject")


def paired(judge_verdicts: dict[str, str], reference: dict[str, str], ids: set[str]) -> tuple[list, list]:
    """(judge, reference) verdict lists over the ids both have, restricted to `ids`."""
    keys = sorted(k for k in reference if k in ids and judge_verdicts.get(k) is not None)
    return [judge_verdicts[k] for k in keys], [reference[k] for k in keys]


def kappa_ci(a: list[str], b: list[str], n_resamples: int, confidence: float, seed: int) -> dict:
    """kappa, concordance and a percentile bootstrap CI resampling reflections (undefined
    resamples, where both raters use one label, are skipped and counted)."""
    if not a:
        raise PipelineError("judge_agreement: no reviewed validation reflection has a judge verdict; "
                            "check the review export and the judge outputs")
    k = cohen_kappa(a, b, labels=LABELS)
    rng = make_rng(seed, "kappa-bootstrap")
    x, y = np.array(a), np.array(b)
    stats, undefined = [], 0
    for _ in range(n_resamples):
        idx = rng.integers(0, len(x), len(x))
        v = cohen_kappa(x[idx].tolist(), y[idx].tolist(), labels=LABELS)
        if v is None:
            undefined += 1
        else:
            stats.append(v)
    alpha = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(stats, [alpha, 1 - alpha])) if stats else (None, None)
    return {"kappa": k, "ci_low": low, "ci_high": high, "n": len(a), "undefined_resamples": undefined,
            "concordance": float(np.mean(x == y))}


def agreement_over_repeats(judge_by_repeat: dict[int, dict[str, str]], reference: dict[str, str],
                           validation_ids: set[str], n_resamples: int, confidence: float, seed: int) -> dict:
    """Per-repeat kappa/concordance, their mean and spread (max - min), and the CI of repeat 0."""
    per = {}
    for r in sorted(judge_by_repeat):
        a, b = paired(judge_by_repeat[r], reference, validation_ids)
        per[r] = kappa_ci(a, b, n_resamples if r == min(judge_by_repeat) else 0, confidence, seed)
    kappas = [p["kappa"] for p in per.values() if p["kappa"] is not None]
    first = per[min(per)]
    return {"kappa": first["kappa"], "ci_low": first["ci_low"], "ci_high": first["ci_high"], "n": first["n"],
            "kappa_mean": float(np.mean(kappas)) if kappas else None,
            "kappa_spread": float(max(kappas) - min(kappas)) if kappas else None,
            "concordance": float(np.mean([p["concordance"] for p in per.values()])),
            "repeats": {str(r): {"kappa": p["kappa"], "concordance": p["concordance"], "n": p["n"]}
                        for r, p in per.items()}}


def paired_kappa_gain(reference: dict[str, str], before: dict[str, str | None], after: dict[str, str | None],
                      ids: list[str], n_resamples: int, confidence: float, seed: int) -> dict:
    """kappa(after) - kappa(before) against one reference over the same items, with a paired
    percentile bootstrap CI (the same resampled items for both; undefined resamples skipped and
    counted). Says whether a prompt revision's gain is more than which items happened to be drawn."""
    keys = [k for k in ids if before.get(k) is not None and after.get(k) is not None and k in reference]
    if not keys:
        raise PipelineError("judge-prompt gain: no item has both verdicts and a reference")
    ref = np.array([reference[k] for k in keys])
    a, b = np.array([before[k] for k in keys]), np.array([after[k] for k in keys])
    def gain(idx: np.ndarray) -> float | None:
        ka = cohen_kappa(a[idx].tolist(), ref[idx].tolist(), labels=LABELS)
        kb = cohen_kappa(b[idx].tolist(), ref[idx].tolist(), labels=LABELS)
        return None if ka is None or kb is None else kb - ka
    point = gain(np.arange(len(keys)))
    rng = make_rng(seed, "kappa-gain-bootstrap")
    stats, undefined = [], 0
    for _ in range(n_resamples):
        g = gain(rng.integers(0, len(keys), len(keys)))
        if g is None:
            undefined += 1
        else:
            stats.append(g)
    alpha = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(stats, [alpha, 1 - alpha])) if stats else (None, None)
    return {"diff": point, "ci_low": low, "ci_high": high, "n": len(keys), "undefined_resamples": undefined,
            "beyond_noise": low is not None and low > 0}


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float | None, float | None]:
    """Wilson score interval of k successes in n (None, None when n == 0)."""
    if n == 0:
        return None, None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
