"""Seed sampling: documents stratified over the six safety scores, and a train/validation
split by SHA-256 of the item id.

Why: candidates are compared on the same documents, and the deciding view is accept
rate per safety score, so every score needs its own share of the sample; the split is
a pure function of the id (identical on every machine) so the validation quarter stays
out of judge calibration whatever else changes.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
import hashlib

from decision_pipeline.common.hashing import sha256_int
from decision_pipeline.common.params import rule

SAFETY_SCORES = tuple(range(6))
SPLITS = ("train", "validation")


@dataclass
class SeedSampleParams:
    per_score: int = rule(min=1, doc="documents drawn per safety score 0-5 (fewer if the pool has fewer)")
    validation_fraction: float = rule(min=0.01, max=0.99, doc="share of ids hashed into the validation split")
    min_chars: int = rule(min=0, doc="skip documents shorter than this (noise stubs give nothing to reflect on)")
    doc_chars: int = rule(min=50, doc="documents are cut to this many characters (at a word boundary) for prompts")


def seed_split(item_id: str, validation_fraction: float) -> str:
    """train or validation by the unsalted SHA-256 of the id, as the research split it:
    the first 8 digest bytes as a big-endian int / 2**64 < 1 - validation_fraction -> train.
    Identical on every machine and run, and reproducible with `sha256sum` alone."""
    u = int.from_bytes(hashlib.sha256(item_id.encode("utf-8")).digest()[:8], "big") / 2**64
    return "train" if u < 1.0 - validation_fraction else "validation"


def clip_text(text: str, n_chars: int) -> str:
    """`text` cut to at most n_chars, at the last word boundary, whitespace normalised."""
    text = " ".join(text.split())
    if len(text) <= n_chars:
        return text
    cut = text[:n_chars]
    return cut[:cut.rfind(" ")] if " " in cut else cut


def sample_seed(docs: list[dict], cfg: SeedSampleParams, seed: int) -> list[dict]:
    """Stratified sample: the first `per_score` documents of each safety score in SHA-256
    order of (seed, id). Rows: id, text (clipped), safety_score, split."""
    by_score: dict[int, list[dict]] = {s: [] for s in SAFETY_SCORES}
    for i, d in enumerate(docs):
        score = d.get("safety_score")
        if not isinstance(score, int) or score not in by_score:
            raise PipelineError(f"pool document '{d.get('id', i)}': safety_score {score!r} is not an integer 0-5")
        if len(" ".join(d["text"].split())) >= cfg.min_chars:
            by_score[score].append(d)
    rows = []
    for score in SAFETY_SCORES:
        ranked = sorted(by_score[score], key=lambda d: (sha256_int("seed-sample", seed, d["id"]), d["id"]))
        for d in ranked[:cfg.per_score]:
            rows.append({"id": d["id"], "text": clip_text(d["text"], cfg.doc_chars), "safety_score": score,
                         "split": seed_split(d["id"], cfg.validation_fraction)})
    if not rows:
        raise PipelineError(f"seed_sample: no pool document has >= {cfg.min_chars} characters; lower min_chars")
    return rows


def seed_counts(rows: list[dict]) -> dict:
    """Counts per safety score and split (the stage's metrics)."""
    c = Counter((r["safety_score"], r["split"]) for r in rows)
    n_val = sum(v for (s, sp), v in c.items() if sp == "validation")
    return {"n": len(rows), "by_score": {str(s): {sp: c[(s, sp)] for sp in SPLITS} for s in SAFETY_SCORES},
            "validation": n_val, "train": len(rows) - n_val,
            "validation_share": n_val / len(rows) if rows else None,
            "split_rule": "unsalted sha256(id)[:8] as int / 2^64 < 1 - validation_fraction -> train"}
