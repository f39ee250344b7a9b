"""Kappa on a constructed review set equals the hand computation; CI and spread over repeats."""
from __future__ import annotations

import pytest

from decision_pipeline.charter import store
from decision_pipeline.charter.agreement import agreement_over_repeats, kappa_ci
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


def test_judge_spread_mean_and_range_when_sampling_and_deterministic_for_the_rule_judge():
    from types import SimpleNamespace

    from decision_pipeline.charter.annotate import judge_spread
    per = {0: {"kappa": 0.5}, 1: {"kappa": 0.7}, 2: {"kappa": 0.6}}
    accept = {0: 0.4, 1: 0.5, 2: 0.6}
    sampled = judge_spread(SimpleNamespace(kind="chat", temperature=0.7), per, accept)
    assert sampled["mode"] == "sampled" and sampled["repeats"] == 3
    assert sampled["kappa"]["mean"] == pytest.approx(0.6) and sampled["kappa"]["range"] == pytest.approx(0.2)
    assert sampled["accept_rate"]["min"] == 0.4 and sampled["accept_rate"]["max"] == 0.6
    assert judge_spread(SimpleNamespace(kind="rules", temperature=0.0), per, accept)["mode"] == "deterministic"
    assert judge_spread(SimpleNamespace(kind="chat", temperature=0.0), per, accept)["mode"] == "deterministic"


def test_llm_judge_with_a_candidates_model_is_refused_naming_both():
    from decision_pipeline.charter.annotate import check_judge_not_candidate
    from decision_pipeline.charter.generators import CandidateParams
    cand = CandidateParams(kind="endpoint", prompt="p.md", reference="", serve_model="", base_url="http://x/v1",
                           model="qwen-7b", tokenizer="t", max_tokens=8, max_prompt_tokens=0, temperature=0.0,
                           batch_size=1, concurrency=1, timeout_s=1.0, max_retries=0, gpus=1)
    from types import SimpleNamespace
    judge = SimpleNamespace(kind="chat", name="llm_judge", model="qwen-7b")
    with pytest.raises(PipelineError, match=r"judge 'llm_judge' is also candidate 'big' \(same model 'qwen-7b'\)"):
        check_judge_not_candidate(judge, {"big": cand})
    check_judge_not_candidate(SimpleNamespace(kind="chat", name="llm_judge", model="other"), {"big": cand})
