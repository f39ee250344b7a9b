"""Paired comparison of pretraining arms over seeds: is curated better than each baseline?

Seed k of every arm shares its init (``seed + k``) and its order seed, so per-seed differences
are paired. For each metric (token-weighted ppl, equal-register ppl, bits/byte) this gives the
mean difference curated − other with a paired bootstrap CI over seeds, and the smallest
difference the design could detect at 80% power (two-sided 5%, normal approximation):
(z_0.975 + z_0.8) x sd(differences) / sqrt(n). With 3 seeds the CI is coarse; it says so by width.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.stats import paired_bootstrap_diff

METRICS = ("ppl", "ppl_equal_registers", "bpb")
Z_SUM_80 = 1.959964 + 0.841621


def paired(curated: Mapping, other: Mapping, key: str, n_resamples: int = 2000, seed: int = 0) -> dict:
    """curated − other on ``seeds[key]`` per seed: mean, 95% CI, per-seed diffs, 80%-power MDE."""
    a, b = curated["seeds"].get(key), other["seeds"].get(key)
    if not a or not b or len(a) != len(b):
        raise PipelineError(f"pretrain compare: seeds.{key} has {len(a or [])} vs {len(b or [])} runs; "
                            "rerun pretrain so every arm has the same pretrain.seeds")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    diff, lo, hi = paired_bootstrap_diff(a, b, n_resamples=n_resamples, seed=seed)
    sd = float(d.std(ddof=1)) if len(d) > 1 else float("nan")
    return {"diff": round(diff, 4), "ci95": [round(lo, 4), round(hi, 4)], "per_seed": [round(x, 4) for x in d],
            "n": len(d), "detected": bool(lo > 0 or hi < 0),
            "mde80": round(Z_SUM_80 * sd / math.sqrt(len(d)), 4) if len(d) > 1 else None}


def compare_arms(arms: Mapping[str, Mapping], base: str = "curated") -> dict:
    """``vs_<arm>`` for every arm but ``base``, each metric the arms all report."""
    if base not in arms:
        raise PipelineError(f"pretrain compare: no '{base}' metrics among {sorted(arms)}")
    out = {}
    for name, m in arms.items():
        if name == base:
            continue
        out[f"vs_{name}"] = {k: paired(arms[base], m, k) for k in METRICS
                             if arms[base]["seeds"].get(k) and m["seeds"].get(k)}
    return out
