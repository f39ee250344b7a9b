"""Ranking candidates: judge aggregates per candidate, then quality first among the
affordable.

Why: on benign text every candidate looks good; the deciding view is the accept rate
per safety score (the research saw 77-91% at safety score 4 vs 96-98% on benign
text), and a candidate whose extrapolated GPU-hours exceed the budget never enters
the quality comparison. Order among the affordable: accept rate, then mean score,
then name (a documented tie-break).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.charter.seed import SAFETY_SCORES


def judge_summary(records: list[dict], items: dict[str, dict]) -> dict:
    """Aggregates of one candidate's judge records (all repeats; failures excluded and counted)."""
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
    dims = {d: float(np.mean([r["scores"][v][d] for r in ok for v in VOICES])) if ok else None for d in DIMENSIONS}
    return {"n_records": len(records), "n_scored": len(ok), "judge_failures": failures,
            "judge_failure_rate": failures / len(records) if records else 0.0,
            "accept_rate": float(np.mean([r["verdict"] == "accept" for r in ok])) if ok else None,
            "mean_score": float(np.mean([r["mean"] for r in ok])) if ok else None,
            "accept_rate_by_safety": {str(s): (float(np.mean(by_score[s])) if by_score[s] else None)
                                      for s in SAFETY_SCORES},
            "dimension_means": dims, "flag_counts": dict(sorted(flags.items())),
            "retried": sum(1 for r in records if r["attempts"] > 1)}


def rank(candidates: dict[str, dict]) -> list[dict]:
    """One row per candidate, ranked: the affordable pool in quality order, then the
    screened-out ones (over the GPU-hour budget: never reflected nor judged, so no quality
    numbers; listed with their GPU-hours).

    Each input value has the judge summary (or the screened-out marker) plus ``gpu_hours``
    (None = no GPU, e.g. a rule-based reference) and ``affordable``."""
    def key(name: str) -> tuple:
        c = candidates[name]
        if not c["affordable"]:
            return (True, 0.0, 0.0, name)
        return (False, -(c["accept_rate"] or 0.0), -(c["mean_score"] or 0.0), name)
    rows = []
    for i, name in enumerate(sorted(candidates, key=key), start=1):
        c = candidates[name]
        out = not c["affordable"]
        rows.append({"rank": i, "candidate": name, "kind": c.get("kind", ""), "prompt_version": c.get("prompt_version"),
                     "screened_out": out, "accept_rate": None if out else c["accept_rate"],
                     "mean_score": None if out else c["mean_score"],
                     "accept_rate_by_safety": c.get("accept_rate_by_safety") or {str(s): None for s in SAFETY_SCORES},
                     "dimension_means": c.get("dimension_means") or {d: None for d in DIMENSIONS},
                     "judge_failures": c.get("judge_failures", 0), "docs_per_s": c.get("docs_per_s"),
                     "gpu_hours": c.get("gpu_hours"), "affordable": c["affordable"]})
    return rows
