"""What reviewers do in the app reaches the judge's agreement: UI reviews and a thread ->
`export` -> the `reviews` stage's import (build_reviews, source=import) -> the
`judge_agreement` computation, with kappa checked against a hand computation."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from tests.review_ui.review_helpers import filled_form, make_annotations, url

from decision_pipeline.charter.annotate import AgreementParams, agreement, build_reviews
from decision_pipeline.charter.checks import split_voices
from decision_pipeline.charter.reviews import ReviewerParams, ReviewsParams
from decision_pipeline.review_ui import queries
from decision_pipeline.review_ui.cli import main


def test_ui_reviews_drive_kappa(tmp_path, monkeypatch, ada, ben, store_path):
    anns = make_annotations()
    val = [a["id"] for a in anns if a["split"] == "validation"]          # six: ann-01, 03, ..., 11
    human = dict(zip(val, ["accept", "accept", "accept", "accept", "reject", "reject"]))
    for ann, verdict in human.items():
        form = filled_form(4 if verdict == "accept" else 2, verdict)
        assert ada.post(url(ann, "/review"), data=form).status_code == 302
    assert ada.post(url(anns[0]["id"], "/review"), data=filled_form()).status_code == 302   # a train-split review
    # ben's thread overrides ada's accept on the fourth: reference = A A A R R R
    r = ben.post(f"/r/{queries.review_id(val[3], 'ada')}/comment", data={"body": "no [X.Y] fits", "verdict": "reject"})
    assert r.status_code == 302

    monkeypatch.setenv("REVIEW_STORE", store_path)
    export = tmp_path / "reviews" / "export.jsonl"
    assert main(["export", "--out", str(export)]) == 0

    reflections = [{**a, "kind": "reference", "voices": split_voices(a["reflection"])} for a in anns]
    judge0 = dict(zip(val, ["accept", "accept", "reject", "reject", "reject", "accept"]))
    judged = [{"annotation_id": a, "repeat": rep, "verdict": v, "scores": None, "judge_prompt_version": 1}
              for rep, verdicts in ((0, judge0), (1, {**dict.fromkeys(val[:3], "accept"),
                                                      **dict.fromkeys(val[3:], "reject")}))
              for a, v in verdicts.items()]
    cfg = ReviewsParams(source="import", import_path=str(export), n_reviews=1, n_reflections=1,
                        reviewers={"x": ReviewerParams(0.0, 0.0), "y": ReviewerParams(0.0, 0.0)}, thread_rate=0.0, thread_fix=0.0)
    out = tmp_path / "reviews_stage"
    out.mkdir()
    counts = build_reviews(reflections, judged, cfg, 0, out)
    assert (counts["reviews"], counts["comments"], counts["reviewers"]) == (7, 1, 1)

    judge_cfg = SimpleNamespace(name="test-judge", kind="rules", repeats=2)
    metrics, confusion = agreement(reflections, judged, out / "export.jsonl",
                                   AgreementParams(n_resamples=20, confidence=0.9), judge_cfg, 0,
                                   tmp_path / "agreement.sqlite")
    # repeat 0 by hand: agree on 4 of 6, both raters say accept half the time:
    # po = 4/6, pe = 0.5*0.5 + 0.5*0.5 = 0.5, kappa = (4/6 - 0.5) / 0.5 = 1/3; repeat 1 agrees fully
    assert metrics["n"] == 6 and metrics["reviewed_outside_validation"] == 1
    assert metrics["kappa"] == pytest.approx(1 / 3)
    assert metrics["repeats"]["1"]["kappa"] == pytest.approx(1.0)
    assert metrics["kappa_spread"] == pytest.approx(2 / 3)
    assert confusion == {"accept": {"accept": 2, "reject": 1}, "reject": {"accept": 1, "reject": 2}}
