"""Paired comparison of pretraining arms over seeds: is curated better than each baseline?

Seed k of every arm shares its init and order seeds (lm/training.seed_plan), so per-seed differences
are paired. For each metric (token-weighted ppl, equal-register ppl, bits/byte) this gives the mean
difference curated − other with a t-interval over seeds, the 80%-power detectable difference and a
verdict by common/verdict.py: with fewer than 5 paired seeds it is "not tested" (the default run has
3; the whole-chain verdict over reruns is in metrics/claims.json, reporting/review/noise_study.py).
"""
from __future__ import annotations

from collections.abc import Mapping

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.verdict import seed_verdict

METRICS = ("ppl", "ppl_equal_registers", "bpb")


def paired(curated: Mapping, other: Mapping, key: str) -> dict:
    """curated − other on ``seeds[key]`` per seed: n, mean, t-interval, sd, 80%-power MDE, verdict."""
    a, b = curated["seeds"].get(key), other["seeds"].get(key)
    if not a or not b or len(a) != len(b):
        raise PipelineError(f"pretrain compare: seeds.{key} has {len(a or [])} vs {len(b or [])} runs; "
                            "rerun pretrain so every arm has the same pretrain.seeds")
    v = seed_verdict([x - y for x, y in zip(a, b)], noise_source="sd of the per-seed differences (within one run)")
    return {**v, "ci95": [v["ci_low"], v["ci_high"]], "per_seed": v.pop("per_run")}


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
