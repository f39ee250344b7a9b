"""Kappa on a constructed review set equals the hand computation; CI and spread over repeats."""
from __future__ import annotations

import pytest

from decision_pipeline.charter import store
from decision_pipeline.charter.agreement import agreement_over_repeats, kappa_ci
from decision_pipeline.charter.reviews import ReviewsParams, seeded_reviews
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.common.errors import PipelineError

SCORES = {v: {d: 4 for d in DIMENSIONS} for v in VOICES}


def _review(i: int, verdict: str) -> dict:
    return {"kind": "review", "id": f"r{i}", "annotation_id": f"a{i}", "reviewer": "ada", "scores": SCORES,
            "verdict": verdict, "notes": "", "created_at": f"2026-01-01T10:{i:02d}:00"}


def constructed():
    """Ten validation reflections. Reviews say accept for a0-a5, reject for a6-a9; threads
    flip a5 to reject and a9 to accept. Judge: accept a0-a3 and a5, reject a4 and a6-a9...
    and a train reflection a10 (ignored)."""
    revs = [_review(i, "accept" if i <= 5 else "reject") for i in range(11)]
    coms = [{"kind": "comment", "id": "c5", "review_id": "r5", "reviewer": "ben", "verdict": "reject", "body": "",
             "created_at": "2026-01-02T00:00:00"},
            {"kind": "comment", "id": "c9", "review_id": "r9", "reviewer": "ben", "verdict": "accept", "body": "",
             "created_at": "2026-01-02T00:00:00"}]
    judge = {f"a{i}": ("accept" if i in (0, 1, 2, 3, 5) else "reject") for i in range(11)}
    judge["a10"] = "accept"
    return revs, coms, judge, {f"a{i}" for i in range(10)}


def test_kappa_equals_hand_computation():
    revs, coms, judge, validation = constructed()
    ref = store.reference_verdicts(revs, coms)
    # reference: accept a0-a4, a9 (6); reject a5-a8, a10
    # on validation (a0-a9): judge A/ref A: a0-a3 = 4; judge A/ref R: a5 = 1;
    #                        judge R/ref A: a4, a9 = 2; judge R/ref R: a6-a8 = 3
    # po = 7/10; judge accepts 5/10, reference accepts 6/10: pe = .5*.6 + .5*.4 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    result = agreement_over_repeats({0: judge}, ref, validation, n_resamples=500, confidence=0.9, seed=0)
    assert result["n"] == 10
    assert result["kappa"] == pytest.approx(0.4)
    assert result["concordance"] == pytest.approx(0.7)
    assert result["ci_low"] <= 0.4 <= result["ci_high"] and result["ci_low"] < result["ci_high"]


def test_spread_over_repeats():
    revs, coms, judge, validation = constructed()
    ref = store.reference_verdicts(revs, coms)
    perfect = {a: ref[a] for a in ref}
    result = agreement_over_repeats({0: judge, 1: perfect}, ref, validation, 100, 0.9, 0)
    assert result["repeats"]["1"]["kappa"] == pytest.approx(1.0)
    assert result["kappa_spread"] == pytest.approx(0.6)
    assert result["kappa_mean"] == pytest.approx(0.7)


def test_failed_judgements_are_left_out_and_empty_is_an_error():
    revs, coms, judge, validation = constructed()
    ref = store.reference_verdicts(revs, coms)
    judge = {**judge, "a0": None}
    assert agreement_over_repeats({0: judge}, ref, validation, 0, 0.9, 0)["n"] == 9
    with pytest.raises(PipelineError, match="no reviewed validation reflection"):
        kappa_ci([], [], 10, 0.9, 0)


def test_seeded_reviews_have_the_asked_shape_and_no_noise_means_kappa_one():
    anns = [{"id": f"x{i:03d}", "split": "validation" if i % 2 else "train",
             "ideal_verdict": "accept" if i % 3 else "reject", "ideal_scores": SCORES} for i in range(200)]
    six = {n: 0.0 for n in ("ada", "ben", "chen", "dara", "eli", "fay")}
    cfg = ReviewsParams(source="seeded", import_path="", n_reviews=120, n_reflections=83, reviewers=six,
                        thread_rate=0.3, thread_fix=1.0)
    recs = seeded_reviews(anns, cfg, seed=1)
    revs = [r for r in recs if r["kind"] == "review"]
    coms = [r for r in recs if r["kind"] == "comment"]
    assert len(revs) == 120 and len({r["annotation_id"] for r in revs}) == 83
    assert {r["reviewer"] for r in revs} == set(six)
    assert all(r["annotation_id"].startswith("x") and int(r["annotation_id"][1:]) % 2 for r in revs)
    ref = store.reference_verdicts(revs, coms)
    ideal = {a["id"]: a["ideal_verdict"] for a in anns}
    assert all(ref[a] == ideal[a] for a in ref)
    # with flips, the thread rule restores part of the agreement
    noisy = ReviewsParams(**{**cfg.__dict__, "reviewers": {n: 0.3 for n in six}})
    recs = seeded_reviews(anns, noisy, seed=1)
    r2 = [r for r in recs if r["kind"] == "review"]
    c2 = [r for r in recs if r["kind"] == "comment"]
    with_threads = store.reference_verdicts(r2, c2)
    without = store.reference_verdicts(r2, [])
    agree = lambda ref: sum(ref[a] == ideal[a] for a in ref)  # noqa: E731
    assert agree(with_threads) > agree(without)
