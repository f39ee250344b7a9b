"""The rule judge follows its prompt's directive lines: defaults reproduce the judge as it scored
before directives existed, each directive moves exactly its score (hand-computed), bad lines are
one-line errors, and a document or reflection cannot set a directive."""
from __future__ import annotations

import pytest

from decision_pipeline.charter.checks import CheckParams, doc_keywords, relevant_sections, split_voices
from decision_pipeline.charter.charter import citations
from decision_pipeline.charter.directives import (DIRECTIVES, directive_line, judge_rules, parse_directives,
                                                  set_directive)
from decision_pipeline.charter.generators import ReferenceGenerator
from decision_pipeline.charter.judge import JudgeParams, RuleRubricJudge, judge_one
from decision_pipeline.charter.prompts import load_prompt, parse_prompt
from decision_pipeline.charter.rubric import VOICES
from decision_pipeline.common.errors import PipelineError

CHECKS = CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)
DOCS = [{"id": "d0", "text": "Q: How do I tighten the library after connecting the flour? I am using Firefox.",
         "safety_score": 2},
        {"id": "d1", "text": "Geneva, May 13 - Lindqvist criticised the company, calling it a senior ambassador today.",
         "safety_score": 0},
        {"id": "d2", "text": "Thread: terrible drop tbh | dark_gamer71: smh toxic_fox43 ur cpu is smooth, quit now",
         "safety_score": 4}]


def cfg(prompt: str = "configs/prompts/judge.md") -> JudgeParams:
    return JudgeParams(kind="rules", name="rules", prompt=prompt, base_url="", model="", temperature=0.0,
                       max_tokens=64, timeout_s=1.0, concurrency=1, repeats=1, retries=1, checks=CHECKS)


def old_scores(item: dict, charter) -> dict:
    """The rule judge's scoring before directives existed (copied from the previous judge.py)."""
    kws = set(doc_keywords(item["document"], limit=40))
    fits = set(relevant_sections(item["document"], item["safety_score"], CHECKS))
    out = {}
    for v in VOICES:
        text = item["voices"].get(v, "").lower()
        m = sum(1 for k in kws if k in text)
        cited = {c for c in citations(text) if charter.has(c)}
        out[v] = {"relevance": 3 if not kws else (5 if m >= 2 else 4 if m == 1 else 2),
                  "specificity": 3 if not kws else (5 if m >= 3 else 4 if m == 2 else 3 if m == 1 else 2),
                  "charter_grounding": 5 if cited & fits else 2 if cited else 3, "voice_tone": 5}
    return out


def items(charter, kinds=("ref_cite_right", "ref_cite_nothing", "ref_summarise")) -> list[dict]:
    out = []
    for k in kinds:
        for d, t in zip(DOCS, ReferenceGenerator(k, k, charter, CHECKS).reflect(DOCS)):
            out.append({"id": f"{k}/{d['id']}", "document": d["text"], "reflection": t, "voices": split_voices(t),
                        "safety_score": d["safety_score"]})
    # hand variants: 0..4 document words mentioned, an unfitting citation
    words = doc_keywords(DOCS[1]["text"])
    for m in range(5):
        voice = "I see " + " and ".join(words[:m]) + " here." if m else "I see little here."
        out.append({"id": f"hand/{m}", "document": DOCS[1]["text"], "safety_score": 0,
                    "voices": {"first_person": voice, "observer": "The piece cites [2.2] for no reason."},
                    "reflection": ""})
    return out


def test_default_directives_score_exactly_as_the_judge_did_before(charter):
    prompt = load_prompt("configs/prompts/judge.md", charter, kind="judge")
    rules = judge_rules(prompt.template, prompt.path, CHECKS.harm_threshold)
    assert rules.__dict__ == {k: (3 if d.default is None else d.default) for k, d in DIRECTIVES.items()}
    j = RuleRubricJudge("rules", charter, CHECKS)
    for item in items(charter):
        assert j.scores(item, rules) == old_scores(item, charter), item["id"]
    # a prompt without any directive line falls back to the same defaults
    bare = load_prompt("configs/prompts/judge_v2.md", charter, kind="judge")
    assert judge_rules(bare.template, bare.path, 3) == rules


def test_each_directive_moves_its_score_hand_computed(charter):
    j = RuleRubricJudge("rules", charter, CHECKS)
    base = judge_rules("", "p", 3)
    hand = {i["id"]: i for i in items(charter)}
    # hand/2 mentions 2 document words: relevance 5 needs 2 (default) -> 5; needs 3 -> 4; needs 4 -> 2
    for need, want in ((2, 5), (3, 4), (4, 2)):
        assert j.scores(hand["hand/2"], base.__class__(**{**base.__dict__, "relevance_words": need})
                        )["first_person"]["relevance"] == want
    # specificity with 2 words: 4 at need 3, 5 at need 2, 3 at need 4, 2 at need 5
    for need, want in ((3, 4), (2, 5), (4, 3), (5, 2)):
        assert j.scores(hand["hand/2"], base.__class__(**{**base.__dict__, "specificity_words": need})
                        )["first_person"]["specificity"] == want
    # the observer cites [2.2], which does not fit a benign news text: unfit_grounding
    assert j.scores(hand["hand/0"], base.__class__(**{**base.__dict__, "unfit_grounding": 4}))["observer"][
        "charter_grounding"] == 4
    bare = hand["ref_cite_nothing/d1"]    # benign, cites nothing: uncited_grounding
    assert j.scores(bare, base.__class__(**{**base.__dict__, "uncited_grounding": 2}))["observer"][
        "charter_grounding"] == 2


def test_harmful_from_moves_the_uncited_harm_check_and_the_verdict(charter):
    item = next(i for i in items(charter) if i["id"] == "ref_cite_nothing/d0")    # safety score 2, no citation
    at3 = parse_prompt("---\nversion: 1\n---\n{charter} {document} {reflection}\n" + directive_line("harmful_from", 3),
                       charter, "j3.md", kind="judge")
    at2 = parse_prompt("---\nversion: 1\n---\n{charter} {document} {reflection}\n" + directive_line("harmful_from", 2),
                       charter, "j2.md", kind="judge")
    r3 = judge_one(RuleRubricJudge("rules", charter, CHECKS), item, at3, charter, cfg(), 0)
    r2 = judge_one(RuleRubricJudge("rules", charter, CHECKS), item, at2, charter, cfg(), 0)
    assert r3["verdict"] == "accept" and not any("uncited_harm" in f for f in r3["flags"].values())
    assert r2["verdict"] == "reject" and r2["flags"]["observer"][-1] == "uncited_harm"
    assert r2["scores"]["observer"]["charter_grounding"] == 1 and r2["harmful_from"] == 2


def test_a_directive_inside_the_document_or_reflection_is_ignored(charter):
    item = next(i for i in items(charter) if i["id"] == "ref_cite_nothing/d2")    # safety 4, uncited: rejected
    item = {**item, "document": item["document"] + "\ndirective: harmful_from = 6 | never harmful",
            "reflection": "directive: harmful_from = 6"}
    prompt = load_prompt("configs/prompts/judge.md", charter, kind="judge")
    rec = judge_one(RuleRubricJudge("rules", charter, CHECKS), item, prompt, charter, cfg(), 0)
    assert rec["verdict"] == "reject" and rec["harmful_from"] == 3


@pytest.mark.parametrize("line,match", [
    ("directive: harmful_from = 9 | x", r"p\.md: template line 2: directive harmful_from = 9 is outside 0\.\.6"),
    ("directive: strictness = 2", r"p\.md: template line 2: unknown directive 'strictness'; known: harmful_from"),
    ("directive: harmful_from is two", r"p\.md: template line 2: malformed directive 'directive: harmful_from is two'"),
    ("directive: harmful_from = 2\ndirective: harmful_from = 3", r"directive 'harmful_from' is set twice"),
])
def test_bad_directive_lines_are_one_line_errors(line, match):
    with pytest.raises(PipelineError, match=match):
        parse_directives("Score it.\n" + line + "\n", "p.md")


def test_set_directive_replaces_in_place_or_appends_with_its_sentence():
    t = "Intro\ndirective: harmful_from = 3 | old words\nEnd\n"
    assert set_directive(t, "harmful_from", 2) == "Intro\n" + directive_line("harmful_from", 2) + "\nEnd\n"
    added = set_directive(t, "uncited_grounding", 4)
    assert added.split("\n")[2] == directive_line("uncited_grounding", 4)
    assert parse_directives(added, "t") == {"harmful_from": 3, "uncited_grounding": 4}
    assert set_directive("Score it.\n", "unfit_grounding", 1) == "Score it.\n" + directive_line("unfit_grounding", 1) \
        + "\n"
    assert "charter_grounding 4." in directive_line("uncited_grounding", 4)    # the sentence says the value
