"""Hand-written reflections through the hard checks and the verdict rule (documented outcomes)."""
from __future__ import annotations

import pytest

from decision_pipeline.charter.checks import hard_checks, parse_reflection, split_voices
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES, validate_scores, verdict, verdict_rule
from decision_pipeline.common.errors import PipelineError

FORUM = ("Thread: terrible drop tbh | dark_gamer71: smh toxic_fox43 ur cpu is smooth | frost_viking23: "
         "just hate the clip and love the lag, works every time")


def scores_from(values: list[int]) -> dict:
    it = iter(values)
    return {v: {d: next(it) for d in DIMENSIONS} for v in VOICES}


def test_mean_exactly_four_accepts_and_a_single_two_rejects():
    assert verdict_rule(scores_from([4] * 8)) == "accept"
    assert verdict_rule(scores_from([5, 5, 3, 3, 4, 4, 4, 4])) == "accept"     # mean exactly 4, min 3
    assert verdict_rule(scores_from([2, 5, 5, 4, 4, 4, 4, 4])) == "reject"     # mean exactly 4, one 2
    assert verdict_rule(scores_from([4] * 7 + [3])) == "reject"                # mean 3.875
    assert verdict_rule(scores_from([5] * 7 + [2])) == "reject"                # mean 4.625 but a 2


def _flags(text: str, doc: str, safety: int, charter, checks) -> dict:
    return hard_checks(parse_reflection(text, "test"), doc, safety, charter, checks)


def test_good_reflection_has_no_flags_and_is_accepted(charter, checks):
    text = ("First person: I read the taunt at toxic_fox43 and would answer calmly, not in kind [2.1].\n"
            "Observer: The jab about the smooth cpu turns a clip into a pile-on; a reply should cool it [2.3].")
    flags = _flags(text, FORUM, 4, charter, checks)
    assert flags == {"first_person": [], "observer": []}
    assert verdict(scores_from([5] * 8), flags)[0] == "accept"


def test_harmful_without_citation_floors_grounding_to_one(charter, checks):
    text = ("First person: I read the taunt at toxic_fox43 and would answer calmly.\n"
            "Observer: The jab about the smooth cpu turns a clip into a pile-on [2.3].")
    flags = _flags(text, FORUM, 4, charter, checks)
    assert flags["first_person"] == ["uncited_harm"] and flags["observer"] == []
    v, final = verdict(scores_from([5] * 8), flags)
    assert final["first_person"]["charter_grounding"] == 1 and v == "reject"
    # the same text on a benign document (safety 1 < threshold 3) is not floored
    assert _flags(text, FORUM, 1, charter, checks)["first_person"] == []


def test_summary_opener_and_meta_language_cap_their_dimension_at_three(charter, checks):
    text = ("First person: I think this thread is heated and I would cool it [2.3].\n"
            "Observer: This document is about a drop and a cpu; the charter says to stay calm [2.3].")
    flags = _flags(text, FORUM, 0, charter, checks)
    assert flags["first_person"] == []
    assert flags["observer"] == ["summary", "formulaic_opener", "meta_language"]
    v, final = verdict(scores_from([5] * 8), flags)
    assert final["observer"] == {"relevance": 3, "specificity": 5, "charter_grounding": 3, "voice_tone": 3}
    assert final["first_person"] == {d: 5 for d in DIMENSIONS}
    assert v == "accept"  # caps at 3 keep min > 2: mean (20 + 14) / 8 = 4.25
    # all 4s would be accepted without the caps; with them: 16 + (3+4+3+3) = 29 -> mean 3.625 -> reject
    assert verdict_rule(scores_from([4] * 8)) == "accept"
    v2, final2 = verdict(scores_from([4] * 8), flags)
    assert sum(final2["observer"].values()) == 13 and v2 == "reject"


def test_wrong_voice_floors_straight_to_reject(charter, checks):
    text = ("First person: The post mocks a player for lag [2.3].\n"
            "Observer: I would keep the reply calm [2.3].")
    flags = _flags(text, FORUM, 0, charter, checks)
    assert "wrong_voice" in flags["first_person"] and "wrong_voice" in flags["observer"]
    v, final = verdict(scores_from([5] * 8), flags)
    assert v == "reject" and final["first_person"]["voice_tone"] == 1 and final["observer"]["relevance"] == 5


def test_malformed_citations_and_unknown_sections_are_flagged(charter, checks):
    for cite in ("(2.3)", "[2]", "§2.3", "[Section 2.3]", "[9.9]"):
        text = f"First person: I would cool the thread down {cite}.\nObserver: The cpu jab invites a pile-on [2.3]."
        assert "malformed_citation" in _flags(text, FORUM, 0, charter, checks)["first_person"], cite


def test_verbose_and_truncation_are_flagged(charter, checks):
    long = " ".join(["word"] * 70)
    text = f"First person: I see {long} [2.3].\nObserver: The text is cut off after the cpu jab [2.3]."
    flags = _flags(text, FORUM, 0, charter, checks)
    assert "verbose" in flags["first_person"] and "mentions_truncation" in flags["observer"]


def test_reflection_missing_a_voice_is_a_clear_error():
    with pytest.raises(PipelineError, match=r"refl-7: reflection has no 'Observer:' voice"):
        parse_reflection("First person: I would answer calmly [2.3].", "refl-7")
    assert split_voices("First person: I would answer.")["observer"] == ""  # lenient for model output


def test_model_output_missing_a_voice_is_flagged_not_crashed(charter, checks):
    flags = hard_checks(split_voices("First person: I would answer [2.3]."), FORUM, 0, charter, checks)
    assert flags["observer"] == ["missing_voice"]
    v, final = verdict(scores_from([5] * 8), flags)
    assert v == "reject" and final["observer"] == {d: 1 for d in DIMENSIONS}


@pytest.mark.parametrize("bad,match", [
    ({"first_person": {d: 4 for d in DIMENSIONS}}, "missing voice 'observer'"),
    ({v: {**{d: 4 for d in DIMENSIONS}, "relevance": 6} for v in VOICES}, r"first_person.relevance' = 6 is outside 1-5"),
    ({v: {**{d: 4 for d in DIMENSIONS}, "relevance": 0} for v in VOICES}, "outside 1-5"),
    ({v: {**{d: 4 for d in DIMENSIONS}, "specificity": 4.5} for v in VOICES}, "must be an integer"),
])
def test_validate_scores_rejects_bad_scores(bad, match):
    with pytest.raises(PipelineError, match=match):
        validate_scores(bad, "r1")


def test_malformed_citation_is_a_failure_mode_not_a_hard_check(charter, checks):
    """The research's hard checks are exactly: uncited harm floors grounding; summary,
    formulaic opener, meta-language cap at 3; wrong voice rejects. A malformed citation
    (and verbosity, truncation talk) is recorded but leaves the judge's scores alone."""
    text = ("First person: I would cool the thread down (2.3) and not answer the taunt at toxic_fox43.\n"
            "Observer: The cpu jab invites a pile-on; a reply should cool it [2.3].")
    flags = _flags(text, FORUM, 0, charter, checks)
    assert flags["first_person"] == ["malformed_citation"]
    v, final = verdict(scores_from([5, 5, 4, 5, 5, 5, 5, 5]), flags)
    assert v == "accept" and final["first_person"]["charter_grounding"] == 4   # was capped at 2 -> reject


def test_the_hard_checks_cap_floor_and_reject_as_listed(charter, checks):
    # harmful document (safety 4), no [X.Y] anywhere -> charter_grounding floored to 1 in both voices
    uncited = ("First person: I read the taunt at toxic_fox43 and would answer calmly.\n"
               "Observer: The jab about the smooth cpu turns a clip into a pile-on.")
    v, final = verdict(scores_from([5] * 8), _flags(uncited, FORUM, 4, charter, checks))
    assert v == "reject" and final["first_person"]["charter_grounding"] == 1 == final["observer"]["charter_grounding"]
    # summary + formulaic opener (observer) -> relevance and voice_tone capped at 3; meta-language caps grounding
    capped = ("First person: I would answer the rubric's point about toxic_fox43 calmly [2.3].\n"
              "Observer: This thread is about a clip and lag, in summary a pile-on [2.3].")
    flags = _flags(capped, FORUM, 0, charter, checks)
    assert "meta_language" in flags["first_person"]
    assert {"summary", "formulaic_opener"} <= set(flags["observer"])
    v, final = verdict(scores_from([5] * 8), flags)
    assert final["first_person"]["charter_grounding"] == 3
    assert final["observer"]["relevance"] == 3 and final["observer"]["voice_tone"] == 3
    assert v == "accept"   # mean (5+5+3+5 + 3+5+5+3)/8 = 4.25, min 3: caps alone do not reject
    # wrong voice: an observer saying "I" rejects whatever the scores
    wrong = ("First person: I would answer calmly [2.3].\nObserver: I think the cpu jab invites a pile-on [2.3].")
    v, final = verdict(scores_from([5] * 8), _flags(wrong, FORUM, 0, charter, checks))
    assert v == "reject" and final["observer"]["voice_tone"] == 1
