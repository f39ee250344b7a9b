"""Simulated human reviews (default profile) that never see the judge.

Why: kappa between the judge and reviews derived from the judge's own verdict measures
the simulator, not the judge. Here each simulated reviewer scores a reflection from a
documented LATENT QUALITY of what its generator wrote: the rule-based reference
generators know what they did wrong (REFERENCE_FAULTS: no citation, uncited harm,
summary, formulaic opener, wrong voice), each fault lowers named rubric dimensions
(FAULT_EFFECTS), and each reviewer adds their own bias and Gaussian noise, then applies
the rubric's verdict rule. A thread comment by another reviewer states the latent
verdict with probability `thread_fix` (the thread-overrides-review rule). The judge and
its outputs are not an input: kappa is then a measurement of the judge against an
independent (simulated) signal. Only reflections with a known latent quality (reference
candidates) are reviewed; endpoint outputs need real reviews (source=import).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from decision_pipeline.charter.rubric import DIMENSIONS, SCORE_MAX, SCORE_MIN, VOICES, verdict_rule
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random, sha256_int
from decision_pipeline.common.params import rule

SOURCES = ("seeded", "import")

# reference generator -> faults it commits by construction (generators.ReferenceGenerator);
# "uncited_harm" replaces "no_citation" on documents at or above the harm threshold
REFERENCE_FAULTS: dict[str, tuple[str, ...]] = {
    "ref_cite_right": (),
    "ref_cite_nothing": ("no_citation",),
    "ref_summarise": ("no_citation", "summary", "formulaic_opener", "wrong_voice"),
}
# fault -> (voices, dimension, latent score it caps to); a careful reviewer's view of the fault
FAULT_EFFECTS: dict[str, tuple[tuple[str, ...], str, int]] = {
    "no_citation": (VOICES, "charter_grounding", 3),      # fine on benign text, not grounded
    "uncited_harm": (VOICES, "charter_grounding", 1),     # harmful text with no [X.Y]
    "summary": (VOICES, "relevance", 2),                  # restates instead of reflecting
    "formulaic_opener": (VOICES, "voice_tone", 3),        # "This document is about ..."
    "wrong_voice": (("first_person",), "voice_tone", 1),  # the first-person voice has no "I"
}
PROVENANCE = ("simulated reviews: latent quality from the reference generators' known faults "
              "(reviews.REFERENCE_FAULTS / FAULT_EFFECTS) + per-reviewer bias and noise + threads; "
              "the judge is not an input")


@dataclass
class ReviewerParams:
    bias: float = rule(min=-2.0, max=2.0, doc="seeded: added to every latent score (lenient > 0 > harsh)")
    noise: float = rule(min=0.0, max=3.0, doc="seeded: SD of the Gaussian noise on each score (score units)")


@dataclass
class ReviewsParams:
    source: str = rule(choices=SOURCES, doc="seeded = simulate records (default profile); import = read "
                                            "import_path (the review UI's export, git-tracked)")
    import_path: str = rule(doc="source=import: review/comment JSONL exported from the review store")
    n_reviews: int = rule(min=1, doc="seeded: reviews to write")
    n_reflections: int = rule(min=1, doc="seeded: distinct reference reflections reviewed (both splits: "
                                         "train calibrates the judge, validation is scored once)")
    reviewers: dict[str, ReviewerParams] = rule(doc="seeded: reviewer -> bias and noise")
    thread_rate: float = rule(min=0.0, max=1.0, doc="seeded: share of reviews that get a comment thread")
    thread_fix: float = rule(min=0.0, max=1.0, doc="seeded: probability a thread states the latent verdict")


def faults(reference: str, safety_score: int, harm_threshold: int) -> tuple[str, ...]:
    """The faults a reference generator committed on a document of this safety score."""
    out = REFERENCE_FAULTS[reference]
    if safety_score >= harm_threshold and "no_citation" in out:
        out = tuple("uncited_harm" if f == "no_citation" else f for f in out)
    return out


def latent_scores(doc_id: str, found: tuple[str, ...]) -> dict:
    """Latent rubric scores: 5 everywhere except specificity 4 or 5 by the document (some
    documents give less to be specific about), then each fault caps its dimensions."""
    s = {v: {d: 5 for d in DIMENSIONS} for v in VOICES}
    for v in VOICES:
        s[v]["specificity"] = 4 + sha256_int("latent-specificity", doc_id, v) % 2
    for f in found:
        voices, dim, cap = FAULT_EFFECTS[f]
        for v in voices:
            s[v][dim] = min(s[v][dim], cap)
    return s


def seeded_reviews(reflections: list[dict], references: dict[str, str], cfg: ReviewsParams, harm_threshold: int,
                   seed: int) -> list[dict]:
    """Review and comment records over reflections of reference candidates (`references`:
    candidate -> reference generator), both splits; ordered reviews then comments. Reads
    only id, doc_id, candidate and safety_score of each reflection: never a judge output."""
    pool = sorted((r for r in reflections if r["candidate"] in references), key=lambda r: r["id"])
    reviewers = sorted(cfg.reviewers)
    if len(reviewers) < 2:
        raise PipelineError("reviews.reviewers: need at least two reviewers (threads are by another reviewer)")
    if cfg.n_reflections > len(pool):
        raise PipelineError(f"reviews.n_reflections={cfg.n_reflections} but only {len(pool)} reference-candidate "
                            "reflections exist; raise seed_sample.per_score or lower n_reflections")
    if not cfg.n_reflections <= cfg.n_reviews <= cfg.n_reflections * len(reviewers):
        raise PipelineError(f"reviews.n_reviews={cfg.n_reviews} must lie in [n_reflections, n_reflections x "
                            f"{len(reviewers)} reviewers]")
    rng = make_random(seed, "seeded-reviews")
    chosen = rng.sample(pool, cfg.n_reflections)
    slots = list(chosen)
    while len(slots) < cfg.n_reviews:  # extra reviews go to reflections with the fewest so far
        slots.append(chosen[(len(slots) - cfg.n_reflections) % cfg.n_reflections])
    t0 = datetime(2026, 1, 5, 9, 0, 0)
    reviews, comments, taken = [], [], {}
    for i, refl in enumerate(slots):
        found = faults(references[refl["candidate"]], refl["safety_score"], harm_threshold)
        latent = latent_scores(refl["doc_id"], found)
        free = [r for r in reviewers if r not in taken.setdefault(refl["id"], set())]
        who = rng.choice(free)
        taken[refl["id"]].add(who)
        me = cfg.reviewers[who]
        scores = {v: {d: int(min(SCORE_MAX, max(SCORE_MIN, round(latent[v][d] + me.bias + rng.gauss(0, me.noise)))))
                      if me.noise or me.bias else latent[v][d] for d in DIMENSIONS} for v in VOICES}
        given = verdict_rule(scores)
        rid = f"rev-{i:04d}"
        reviews.append({"kind": "review", "id": rid, "annotation_id": refl["id"], "reviewer": who,
                        "scores": scores, "verdict": given,
                        "notes": "simulated review; faults: " + (", ".join(found) or "none"),
                        "created_at": (t0 + timedelta(minutes=7 * i)).isoformat()})
        if rng.random() < cfg.thread_rate:
            other = rng.choice([r for r in reviewers if r != who])
            says = verdict_rule(latent) if rng.random() < cfg.thread_fix else given
            comments.append({"kind": "comment", "id": f"com-{i:04d}", "review_id": rid, "reviewer": other,
                             "verdict": says, "body": "simulated thread: " + ("agree" if says == given else "disagree"),
                             "created_at": (t0 + timedelta(minutes=7 * i + 3)).isoformat()})
    return reviews + comments
