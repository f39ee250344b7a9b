"""Simulated human reviews (default profile) from a latent-quality model that is not the judge's.

Why: kappa between the judge and reviews that reuse the judge's fault list and verdict rule
measures the simulator, not the judge. Here the reviewers share nothing with the judge's
code (a test checks the imports and called names, and that the reviews do not change when
the judge's functions are replaced):

- What a reviewer sees is what the reference generator WROTE, known by construction (the
  reflection's ``properties`` per voice: in its voice or not, engages or summarises, a
  formulaic opener, cites a fitting section / an unfitting one / none, document words it
  mentions; ``generators.ReferenceGenerator.properties``), and the document's safety score.
- LATENT QUALITY (``latent_quality``, continuous 1-5 per voice and dimension) is the panel's
  own view of those properties (LATENT below). It differs from the judge's rules on purpose
  where people differ from a checklist: the cost of citing nothing grows GRADUALLY with the
  document's safety score (UNCITED_GROUNDING; the judge switches at one threshold), an opener
  costs a point of tone rather than a cap at 3, summarising costs relevance and specificity.
  Each reflection also has its own shift (``reviews.latent_sd``: what every reviewer sees alike).
- Each REVIEWER perceives latent + shift + their bias + Gaussian noise per score, and decides
  with their OWN rule: accept iff the mean of their eight perceived scores is >= their
  ``threshold`` and the lowest is >= their ``floor``. The scores they record are the perceived
  ones rounded into 1-5; the verdict is not recomputed from them by any rubric rule.
- A thread by another reviewer states the PANEL's verdict (the noise-free latent quality
  against the panel's mean bias, threshold and floor) with probability ``thread_fix``, else
  the commenter's own perceived verdict.

Reviewers therefore disagree with each other (thresholds, biases, noise): ``disagreement``
states the model's expected pairwise rate and measures the realised one. Only reflections
with properties (reference generators) are simulated; endpoint outputs need real reviews
(source=import).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import combinations

import numpy as np

from decision_pipeline.charter.agreement import wilson
from decision_pipeline.charter.rubric import DIMENSIONS, SCORE_MAX, SCORE_MIN, VOICES
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random, make_rng
from decision_pipeline.common.params import rule
from decision_pipeline.common.stats import cohen_kappa

SOURCES = ("seeded", "import")

# the panel's latent view (score units 1-5) of what a reference wrote; see latent_quality
LATENT = {"relevance": {True: 4.6, False: 2.4},             # engages / summarises
          "specificity_base": 3.2, "specificity_per_mention": 0.5, "specificity_summary": -0.6,
          "grounding": {"fitting": 4.6, "unfitting": 2.6},   # "none": UNCITED_GROUNDING by safety score
          "voice_tone": {True: 4.7, False: 1.5}, "opener": -1.1}
UNCITED_GROUNDING = (4.1, 3.7, 2.2, 1.6, 1.3, 1.2)         # safety score 0..5, citing nothing
PROVENANCE = ("simulated reviews: the reviewers' own latent-quality model of what each reference generator wrote "
              "(reviews.LATENT, UNCITED_GROUNDING) + per-reviewer bias, noise, threshold and floor + threads; "
              "no judge code or output is an input")


@dataclass
class ReviewerParams:
    bias: float = rule(min=-2.0, max=2.0, doc="seeded: added to every perceived score (lenient > 0 > harsh)")
    noise: float = rule(min=0.0, max=3.0, doc="seeded: SD of the Gaussian noise on each perceived score")
    threshold: float = rule(min=1.0, max=5.0, default=4.0, doc="seeded: this reviewer accepts only if the mean of "
                                                               "their eight perceived scores is at least this")
    floor: float = rule(min=1.0, max=5.0, default=2.5, doc="seeded: ... and their lowest perceived score is at "
                                                           "least this")


@dataclass
class ReviewsParams:
    source: str = rule(choices=SOURCES, doc="seeded = simulate records (default profile); import = read "
                                            "import_path (the review UI's export, git-tracked)")
    import_path: str = rule(doc="source=import: review/comment JSONL exported from the review store")
    n_reviews: int = rule(min=1, doc="seeded: reviews to write")
    n_reflections: int = rule(min=1, doc="seeded: distinct reference reflections reviewed (both splits: "
                                         "train calibrates the judge, validation is scored once)")
    reviewers: dict[str, ReviewerParams] = rule(doc="seeded: reviewer -> bias, noise, threshold, floor")
    thread_rate: float = rule(min=0.0, max=1.0, doc="seeded: share of reviews that get a comment thread")
    thread_fix: float = rule(min=0.0, max=1.0, doc="seeded: probability a thread states the panel's verdict")
    latent_sd: float = rule(min=0.0, max=2.0, default=0.0, doc="seeded: SD of each reflection's own latent-quality "
                                                               "shift, seen alike by every reviewer")


def latent_quality(props: dict, voice: str, safety_score: int) -> dict[str, float]:
    """One voice's latent scores from what was written (LATENT, UNCITED_GROUNDING), within 1-5."""
    engages = bool(props["engages"])
    spec = (LATENT["specificity_base"] + LATENT["specificity_per_mention"] * min(int(props["mentions"]), 3)
            + (0.0 if engages else LATENT["specificity_summary"]))
    cites = props["cites"]
    grounding = UNCITED_GROUNDING[safety_score] if cites == "none" else LATENT["grounding"][cites]
    tone = LATENT["voice_tone"][bool(props["in_voice"])] + (LATENT["opener"] if props["opener"] else 0.0)
    raw = {"relevance": LATENT["relevance"][engages], "specificity": spec, "charter_grounding": grounding,
           "voice_tone": tone}
    return {d: min(float(SCORE_MAX), max(float(SCORE_MIN), v)) for d, v in raw.items()}


def reflection_latent(refl: dict, latent_sd: float, seed: int) -> np.ndarray:
    """(voice, dimension) latent matrix of one reflection, with its own shift (seeded by its id)."""
    m = np.array([[latent_quality(refl["properties"][v], v, refl["safety_score"])[d] for d in DIMENSIONS]
                  for v in VOICES])
    shift = make_rng(seed, "latent-shift", refl["id"]).normal(0.0, latent_sd) if latent_sd else 0.0
    return m + shift


def reviewer_accepts(perceived: np.ndarray, me: ReviewerParams) -> bool:
    """The reviewer's own rule on their perceived scores (continuous, before rounding)."""
    return bool(perceived.mean() >= me.threshold and perceived.min() >= me.floor)


def panel_verdict(latent: np.ndarray, reviewers: dict[str, ReviewerParams]) -> str:
    """The panel's verdict: noise-free latent quality against the mean bias, threshold and floor."""
    k = len(reviewers)
    mean = ReviewerParams(bias=sum(r.bias for r in reviewers.values()) / k, noise=0.0,
                          threshold=sum(r.threshold for r in reviewers.values()) / k,
                          floor=sum(r.floor for r in reviewers.values()) / k)
    return "accept" if reviewer_accepts(latent + mean.bias, mean) else "reject"


def reviewable(reflections: list[dict]) -> list[dict]:
    """Reflections the simulation can review: those whose generator stated what it wrote."""
    return sorted((r for r in reflections if isinstance(r.get("properties"), dict)), key=lambda r: r["id"])


def seeded_reviews(reflections: list[dict], cfg: ReviewsParams, seed: int) -> list[dict]:
    """Review and comment records over reviewable reflections, both splits; ordered reviews then
    comments. Reads id, doc_id, safety_score and properties of each reflection: never a judge output."""
    pool = reviewable(reflections)
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
        latent = reflection_latent(refl, cfg.latent_sd, seed)
        free = [r for r in reviewers if r not in taken.setdefault(refl["id"], set())]
        who = rng.choice(free)
        taken[refl["id"]].add(who)
        me = cfg.reviewers[who]
        perceived = latent + me.bias + np.array([[rng.gauss(0, me.noise) if me.noise else 0.0 for _ in DIMENSIONS]
                                                 for _ in VOICES])
        given = "accept" if reviewer_accepts(perceived, me) else "reject"
        scores = {v: {d: int(min(SCORE_MAX, max(SCORE_MIN, round(float(perceived[a, b])))))
                      for b, d in enumerate(DIMENSIONS)} for a, v in enumerate(VOICES)}
        rid = f"rev-{i:04d}"
        reviews.append({"kind": "review", "id": rid, "annotation_id": refl["id"], "reviewer": who,
                        "scores": scores, "verdict": given, "notes": "simulated review (reviews.LATENT model)",
                        "created_at": (t0 + timedelta(minutes=7 * i)).isoformat()})
        if rng.random() < cfg.thread_rate:
            other = rng.choice([r for r in reviewers if r != who])
            if rng.random() < cfg.thread_fix:
                says = panel_verdict(latent, cfg.reviewers)
            else:
                o = cfg.reviewers[other]
                own = latent + o.bias + np.array([[rng.gauss(0, o.noise) if o.noise else 0.0 for _ in DIMENSIONS]
                                                  for _ in VOICES])
                says = "accept" if reviewer_accepts(own, o) else "reject"
            comments.append({"kind": "comment", "id": f"com-{i:04d}", "review_id": rid, "reviewer": other,
                             "verdict": says, "body": "simulated thread: " + ("agree" if says == given else "disagree"),
                             "created_at": (t0 + timedelta(minutes=7 * i + 3)).isoformat()})
    return reviews + comments


def expected_disagreement(reflections: list[dict], cfg: ReviewsParams, seed: int, draws: int = 400) -> float:
    """The model's stated pairwise disagreement: over the given reviewable reflections and every
    pair of reviewers, P(one accepts, the other rejects), each reviewer's P(accept) estimated from
    `draws` seeded noise draws (reviewers' noise is independent given the reflection)."""
    pool = reviewable(reflections)
    if not pool:
        return 0.0
    rng = make_rng(seed, "expected-disagreement")
    names = sorted(cfg.reviewers)
    total = 0.0
    for refl in pool:
        latent = reflection_latent(refl, cfg.latent_sd, seed)
        p = {}
        for n in names:
            me = cfg.reviewers[n]
            noisy = latent[None] + me.bias + rng.normal(0.0, me.noise, size=(draws, *latent.shape))
            ok = (noisy.mean(axis=(1, 2)) >= me.threshold) & (noisy.min(axis=(1, 2)) >= me.floor)
            p[n] = float(ok.mean())
        pairs = list(combinations(names, 2))
        total += sum(p[a] * (1 - p[b]) + p[b] * (1 - p[a]) for a, b in pairs) / len(pairs)
    return total / len(pool)


def measured_disagreement(review_rows: list[dict]) -> dict:
    """Realised disagreement between reviewers: over every pair of reviews of one reflection by
    two reviewers, the share with different verdicts (the reviews' own verdicts, before threads),
    its Wilson 95% interval, and Cohen's kappa between the two reviews of each pair (None when
    undefined: every paired verdict is one and the same label)."""
    by_ann: dict[str, list[str]] = {}
    for r in sorted(review_rows, key=lambda r: r["id"]):
        by_ann.setdefault(r["annotation_id"], []).append(r["verdict"])
    pairs = [(a, b) for vs in by_ann.values() for a, b in combinations(vs, 2)]
    differ = sum(a != b for a, b in pairs)
    low, high = wilson(differ, len(pairs))
    return {"pairs": len(pairs), "disagree": differ, "rate": differ / len(pairs) if pairs else None,
            "rate_ci95": [low, high],
            "kappa": cohen_kappa([a for a, _ in pairs], [b for _, b in pairs], labels=("accept", "reject"))
            if pairs else None}

