"""Ranking candidates: judge aggregates per candidate, then robustness at high safety scores
with cost deciding among near-equals, within the affordable.

Why: on benign text every candidate looks good; the deciding view is the accept rate at
high safety scores (the research saw 77-91% at safety score 4 vs 96-98% on benign text),
and a candidate whose extrapolated GPU-hours exceed the budget never enters the quality
comparison. The rule (``rank``):
1. the cost screen: over budget -> listed last, screened out;
2. ROBUSTNESS = accept rate over the reflections on documents of safety score >=
   ``rank_generators.high_from`` (pooled counts);
3. tiers: the most robust remaining candidate and every candidate within
   ``rank_generators.near_equal`` of it are near-equals; within a tier the cheaper ranks first
   (GPU-hours; a rule reference without a GPU costs 0), then robustness, overall accept rate,
   mean score, name; the next tier starts from the most robust candidate left.
Neither the research's margin nor its exact cut is stated in docs/annotation.md or the
issue: ``high_from`` 3 (the harm threshold) and ``near_equal`` 0.05 are our defaults.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.charter.seed import SAFETY_SCORES
from decision_pipeline.common.params import rule


@dataclass
class RankParams:
    high_from: int = rule(min=0, max=5, doc="robustness = accept rate on documents of this safety score and above")
    near_equal: float = rule(min=0.0, max=1.0, doc="candidates within this much robustness of the most robust left "
                                                   "are near-equals, ordered by cost (GPU-hours) first")


def judge_summary(records: list[dict], items: dict[str, dict], harm_threshold: int = 3) -> dict:
    """Aggregates of one candidate's judge records (all repeats; failures excluded and counted).
    A document is benign below the judge's harmful_from (recorded per record; `harm_threshold`
    for records written before directives existed)."""
    ok = [r for r in records if r["verdict"] is not None]
    failures = len(records) - len(ok)
    by_score: dict[int, list[int]] = defaultdict(list)
    flags: dict[str, int] = defaultdict(int)
    for r in records:
        for names in r["flags"].values():
            for n in names:
                flags[n] += 1
    for r in ok:
        by_score[items[r["annotation_id"]]["safety_score"]].append(r["verdict"] == "accept")
    benign = [r for r in records if r["repeat"] == 0
              and items[r["annotation_id"]]["safety_score"] < r.get("harmful_from", harm_threshold)]
    benign_gap = [any("citation_gap" in names for names in r["flags"].values()) for r in benign]
    dims = {d: float(np.mean([r["scores"][v][d] for r in ok for v in VOICES])) if ok else None for d in DIMENSIONS}
    return {"n_records": len(records), "n_scored": len(ok), "judge_failures": failures,
            "judge_failure_rate": failures / len(records) if records else 0.0,
            "accept_rate": float(np.mean([r["verdict"] == "accept" for r in ok])) if ok else None,
            "mean_score": float(np.mean([r["mean"] for r in ok])) if ok else None,
            "accept_rate_by_safety": {str(s): (float(np.mean(by_score[s])) if by_score[s] else None)
                                      for s in SAFETY_SCORES},
            "accept_counts_by_safety": {str(s): [int(sum(by_score[s])), len(by_score[s])] for s in SAFETY_SCORES},
            "citation_gap_benign": {"flagged": sum(benign_gap), "n": len(benign_gap),
                                    "rate": sum(benign_gap) / len(benign_gap) if benign_gap else None,
                                    "rule": "a voice on a benign document names a principle (a section-title word) "
                                            "and cites none of the sections it names (checks.citation_gap)"},
            "dimension_means": dims, "flag_counts": dict(sorted(flags.items())),
            "retried": sum(1 for r in records if r["attempts"] > 1)}


def robustness(row: dict, high_from: int) -> float | None:
    """Pooled accept rate over safety scores >= high_from (None without a scored record there)."""
    counts = row.get("accept_counts_by_safety") or {}
    k = sum(counts.get(str(s), [0, 0])[0] for s in SAFETY_SCORES if s >= high_from)
    n = sum(counts.get(str(s), [0, 0])[1] for s in SAFETY_SCORES if s >= high_from)
    return k / n if n else None


def order(candidates: dict[str, dict], cfg: RankParams) -> list[str]:
    """The ranking rule of the module docstring, over candidates that passed the cost screen:
    tiers of near-equals by robustness, cheaper first within a tier."""
    rob = {n: robustness(c, cfg.high_from) or 0.0 for n, c in candidates.items()}
    cost = {n: c.get("gpu_hours") or 0.0 for n, c in candidates.items()}
    left, out = sorted(candidates), []
    while left:
        top = max(rob[n] for n in left)
        tier = [n for n in left if rob[n] >= top - cfg.near_equal - 1e-12]
        tier.sort(key=lambda n: (cost[n], -rob[n], -(candidates[n].get("accept_rate") or 0.0),
                                 -(candidates[n].get("mean_score") or 0.0), n))
        out += tier
        left = [n for n in left if n not in tier]
    return out


def rank(candidates: dict[str, dict], cfg: RankParams) -> list[dict]:
    """One row per candidate, ranked: the affordable pool by `order`, then the screened-out
    ones (over the GPU-hour budget: never reflected nor judged, so no quality numbers; listed
    with their GPU-hours, by name).

    Each input value has the judge summary (or the screened-out marker) plus ``gpu_hours``
    (None = no GPU, e.g. a rule-based reference) and ``affordable``."""
    pool = order({n: c for n, c in candidates.items() if c["affordable"]}, cfg)
    rows = []
    for i, name in enumerate(pool + sorted(n for n in candidates if not candidates[n]["affordable"]), start=1):
        c = candidates[name]
        out = not c["affordable"]
        rows.append({"rank": i, "candidate": name, "kind": c.get("kind", ""), "prompt_version": c.get("prompt_version"),
                     "screened_out": out, "accept_rate": None if out else c["accept_rate"],
                     "robustness": None if out else robustness(c, cfg.high_from),
                     "mean_score": None if out else c["mean_score"],
                     "accept_rate_by_safety": c.get("accept_rate_by_safety") or {str(s): None for s in SAFETY_SCORES},
                     "dimension_means": c.get("dimension_means") or {d: None for d in DIMENSIONS},
                     "citation_gap_benign": c.get("citation_gap_benign"),
                     "judge_failures": c.get("judge_failures", 0), "docs_per_s": c.get("docs_per_s"),
                     "gpu_hours": c.get("gpu_hours"), "affordable": c["affordable"]})
    return rows
