"""Seeded human-review records with a known agreement structure (default profile).

Why: kappa must be testable without people. Each seeded reviewer starts from the
rubric stand-in's verdict on repeat 0 (the "ideal") and flips it with their own
probability; a thread comment by another reviewer carries the ideal verdict with
probability `thread_fix`, so the thread-overrides-review rule measurably restores
agreement. The expected kappa therefore follows from the flip rates: this exercises
the store and the statistics, it is not evidence about any real judge.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random
from decision_pipeline.common.params import rule

SOURCES = ("seeded", "import")


@dataclass
class ReviewsParams:
    source: str = rule(choices=SOURCES, doc="seeded = generate records (default profile); import = read "
                                            "import_path (the review UI's export, git-tracked)")
    import_path: str = rule(doc="source=import: review/comment JSONL exported from the review store")
    n_reviews: int = rule(min=1, doc="seeded: reviews to write")
    n_reflections: int = rule(min=1, doc="seeded: distinct reflections reviewed (validation split)")
    reviewers: dict[str, float] = rule(doc="seeded: reviewer -> probability of flipping the ideal verdict")
    thread_rate: float = rule(min=0.0, max=1.0, doc="seeded: share of reviews that get a comment thread")
    thread_fix: float = rule(min=0.0, max=1.0, doc="seeded: probability a thread states the ideal verdict")


def _scores_for(verdict: str, ideal: dict) -> dict:
    """Scores consistent with `verdict`: the ideal ones, nudged across the rule if needed."""
    s = {v: dict(ideal[v]) for v in VOICES}
    values = [s[v][d] for v in VOICES for d in DIMENSIONS]
    accept_ok = sum(values) >= 32 and min(values) > 2
    if verdict == "accept" and not accept_ok:
        s = {v: {d: max(4, s[v][d]) for d in DIMENSIONS} for v in VOICES}
    if verdict == "reject" and accept_ok:
        s[VOICES[0]]["charter_grounding"] = 2
    return s


def seeded_reviews(annotations: list[dict], cfg: ReviewsParams, seed: int) -> list[dict]:
    """Review and comment records over validation annotations that have an ideal
    verdict and scores (``ideal_verdict``, ``ideal_scores``); ordered reviews then comments."""
    pool = sorted((a for a in annotations if a["split"] == "validation" and a.get("ideal_verdict")),
                  key=lambda a: a["id"])
    reviewers = sorted(cfg.reviewers)
    if len(reviewers) < 2:
        raise PipelineError("reviews.reviewers: need at least two reviewers (threads are by another reviewer)")
    if cfg.n_reflections > len(pool):
        raise PipelineError(f"reviews.n_reflections={cfg.n_reflections} but only {len(pool)} validation "
                            "reflections exist; raise seed_sample.per_score or lower n_reflections")
    if not cfg.n_reflections <= cfg.n_reviews <= cfg.n_reflections * len(reviewers):
        raise PipelineError(f"reviews.n_reviews={cfg.n_reviews} must lie in [n_reflections, n_reflections x "
                            f"{len(reviewers)} reviewers]")
    rng = make_random(seed, "seeded-reviews")
    chosen = rng.sample(pool, cfg.n_reflections)
    slots = [a for a in chosen]
    while len(slots) < cfg.n_reviews:  # extra reviews go to reflections with the fewest so far
        slots.append(chosen[(len(slots) - cfg.n_reflections) % cfg.n_reflections])
    t0 = datetime(2026, 1, 5, 9, 0, 0)
    reviews, comments, taken = [], [], {}
    for i, ann in enumerate(slots):
        free = [r for r in reviewers if r not in taken.setdefault(ann["id"], set())]
        who = rng.choice(free)
        taken[ann["id"]].add(who)
        flip = rng.random() < cfg.reviewers[who]
        ideal = ann["ideal_verdict"]
        given = ({"accept": "reject", "reject": "accept"}[ideal]) if flip else ideal
        rid = f"rev-{i:04d}"
        reviews.append({"kind": "review", "id": rid, "annotation_id": ann["id"], "reviewer": who,
                        "scores": _scores_for(given, ann["ideal_scores"]), "verdict": given,
                        "notes": "seeded review" + (" (flipped)" if flip else ""),
                        "created_at": (t0 + timedelta(minutes=7 * i)).isoformat()})
        if rng.random() < cfg.thread_rate:
            other = rng.choice([r for r in reviewers if r != who])
            says = ideal if rng.random() < cfg.thread_fix else given
            comments.append({"kind": "comment", "id": f"com-{i:04d}", "review_id": rid, "reviewer": other,
                             "verdict": says, "body": "seeded thread: " + ("agree" if says == given else "disagree"),
                             "created_at": (t0 + timedelta(minutes=7 * i + 3)).isoformat()})
    return reviews + comments
