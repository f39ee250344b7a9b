"""The held-out evaluation set of the curation experiment, disjoint from the dev target.

Why a second set: the register classifier is trained on the dev *target*, so
perplexity measured on the same documents rewards the selection for fitting the
documents that steered it. The research scored on a hidden set; here the
held-out set is drawn apart from the target (its own generator stream, or its
own share of an external dev file by SHA-256 of the id) and then loses every
document that is a near-duplicate (MinHash LSH, `curate.minhash`) of a target
or pool document, so no curated or random selection has seen it or its twin.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from decision_pipeline.common.hashing import stable_split
from decision_pipeline.curation.minhash import MinhashParams, dedup


def split_external(dev: Sequence[dict], heldout_fraction: float) -> tuple[list[dict], list[dict]]:
    """(target, held-out) of an external dev file, by SHA-256 of each id (seed-free, stable)."""
    if heldout_fraction <= 0:
        return list(dev), []
    fractions = {"target": 1 - heldout_fraction, "heldout": heldout_fraction}
    parts: dict[str, list[dict]] = {"target": [], "heldout": []}
    for d in dev:
        parts[stable_split(d["id"], fractions, salt="heldout")].append(d)
    return parts["target"], parts["heldout"]


def split_tune(heldout: Sequence[dict], tune_fraction: float) -> tuple[list[dict], list[dict]]:
    """(held-out, tune) by SHA-256 of each id: knobs are tuned on one part, the headline read on the other."""
    if tune_fraction <= 0:
        return list(heldout), []
    parts: dict[str, list[dict]] = {"heldout": [], "tune": []}
    for d in heldout:
        parts[stable_split(d["id"], {"heldout": 1 - tune_fraction, "tune": tune_fraction}, salt="tune")].append(d)
    return parts["heldout"], parts["tune"]


def drop_near_duplicates(heldout: Sequence[dict], target: Sequence[dict], pool: Sequence[dict],
                         p: MinhashParams, seed: int) -> tuple[list[dict], dict]:
    """The held-out documents that have no near-duplicate among target, pool or earlier held-out ones.

    One LSH pass over target + pool + held-out (in that order): dedup keeps the first member of
    each cluster, so a held-out document in a cluster with anything before it is dropped.
    """
    ordered = [*target, *pool, *heldout]
    result = dedup(ordered, p, seed)
    removed = set(result.removed_ids)
    kept = [d for d in heldout if d["id"] not in removed]
    return kept, {"near_duplicates_dropped": len(heldout) - len(kept),
                  "registers": dict(sorted(Counter(d["register"] for d in kept).items()))}
