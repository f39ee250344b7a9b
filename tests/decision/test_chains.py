"""Chain judging and selection on small hand-written chains."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.decision.sft.chains import (DEFAULT_LOOKUP_PATTERNS, detect_loop, drop_counts, ensure_nonempty,
                                                   find_lookup, judge_chain, select_per_question, selection_metrics,
                                                   strip_quirks)

KEYWORD_Q = {"id": "kw1", "family": "keyword", "options": [{"id": "false", "text": "no", "value": None},
                                                           {"id": "true", "text": "yes", "value": None}],
             "gold": "true"}


def question(qid: str, family: str, n: int, gold: int) -> dict:
    return {"id": qid, "family": family, "gold": f"o{gold}",
            "options": [{"id": f"o{i}", "text": str(i), "value": float(i)} for i in range(n)]}


def chain(qid: str, body: str, answer: str | None = "B", *, sample: int = 0, source: str = "base",
          finish: str = "stop", n_tokens: int = 100) -> dict:
    text = f"<think>\n{body}\n</think>\nAnswer: {answer}" if answer else f"<think>\n{body}"
    return {"question_id": qid, "sample": sample, "source": source, "text": text,
            "token_ids": list(range(n_tokens)), "finish_reason": finish, "n_tokens": n_tokens}


def judged(qid: str, n_tokens: int, *, sample: int = 0, source: str = "base", correct: bool = True,
           drop: str | None = None) -> dict:
    """A judged record built directly (for selection tests)."""
    return {"question_id": qid, "sample": sample, "source": source, "text": "", "token_ids": [],
            "finish_reason": "stop", "n_tokens": n_tokens, "parsed": 0 if correct else 1,
            "correct": correct, "drop_reason": drop}


def naive_repeated_line(text: str, times: int = 3) -> bool:
    """The filter the research rejected: any line occurring `times`+ times."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return any(n >= times for n in Counter(lines).values())


# ------------------------------------------------------------------ loops
RULE = "Rule: a word matches only if it is spelled exactly the same, letter for letter."
RULE_BODY = "\n".join([
    "Look for ladder.", RULE, "table is not ladder, the letters differ.", RULE,
    "ladders has an extra s, so by the rule it does not count.", RULE,
    "ladder is spelled exactly like ladder.", RULE, "So ladder is in the list."])

WORDS = ("table cloud mirror forest river window candle garden pencil bottle rocket silver basket "
         "hammer island jacket kettle lemon marble needle orange pillow quarry saddle tunnel "
         "violin wagon yogurt zipper anchor").split()
CHECKLIST_BODY = "\n".join(["Look for ladder."] + [f"{w}: no." for w in WORDS] + ["ladder: match.",
                                                                                  "So ladder is in the list."])


def test_rule_quoted_several_times_is_kept():
    assert naive_repeated_line(RULE_BODY)  # the naive filter would have dropped this healthy chain
    out = judge_chain(chain("kw1", RULE_BODY), KEYWORD_Q)
    assert out["drop_reason"] is None and out["correct"] and out["parsed"] == 1


def test_keyword_checklist_with_same_shape_lines_is_kept():
    assert CHECKLIST_BODY.count(": no.") == len(WORDS) >= 30
    out = judge_chain(chain("kw1", CHECKLIST_BODY), KEYWORD_Q)
    assert out["drop_reason"] is None and out["correct"]


def test_tail_repeating_segment_ten_times_is_a_loop():
    body = "655 vs 934: 934 is larger.\n" + "Let me double-check: 934 is larger than 655.\n" * 10
    assert detect_loop(chain("q", body)["text"], "stop") == "repeat"
    out = judge_chain(chain("kw1", body), KEYWORD_Q)
    assert out["drop_reason"] == "loop:repeat" and out["correct"]  # correct, but still not kept
    # the same segment only twice is ordinary text
    assert detect_loop(chain("q", "Let me double-check: 934 is larger than 655.\n" * 2)["text"], "stop") is None


def test_short_period_loop_cut_mid_segment_is_a_loop():
    body = "So the answer is " + "wait, no, " * 12 + "wai"
    assert detect_loop(body, "stop") == "repeat"


def test_long_period_loop_is_caught_by_distinct_ratio():
    rng = random.Random(3)
    paragraph = " ".join(rng.choice(WORDS) + ("." if i % 9 == 8 else "") for i in range(80))
    text = chain("q", "\n".join([paragraph] * 6))["text"]
    assert detect_loop(text, "stop") == "repeat"
    # period 80+ words is beyond window // min_repeats, so only the distinct-ratio test sees it
    assert detect_loop(text, "stop", min_distinct=0.0) is None


def test_cap_hit_is_dropped_as_loop_cap():
    out = judge_chain(chain("kw1", "table: no.\ncloud: no.", answer=None, finish="length"), KEYWORD_Q)
    assert out["drop_reason"] == "loop:cap" and out["parsed"] is None and not out["correct"]
    assert detect_loop(RULE_BODY, "length") == "cap"


def test_unparsed_chain_and_bad_params():
    out = judge_chain(chain("kw1", "ladder: match.", answer="Z"), KEYWORD_Q)
    assert out["drop_reason"] == "unparsed"
    with pytest.raises(PipelineError, match="min_repeats"):
        detect_loop("a b c", "stop", min_repeats=1)
    with pytest.raises(PipelineError, match="unknown key"):
        judge_chain(chain("kw1", "x"), KEYWORD_Q, loop_params={"repeats": 3})
    with pytest.raises(PipelineError, match="finish_reason"):
        judge_chain(chain("kw1", "x", finish="eos"), KEYWORD_Q)


# ------------------------------------------------------------------ look-ups
LOOKUPS = [
    "I found similar examples online and they all picked B.",
    "According to my search, the largest animal listed is the whale.",
    "I looked it up and lemon is a fruit.",
    "After searching the web, 934 seems right.",
    "Based on similar examples I found, the answer is C.",
    "A quick Google search confirms that a goat is an animal.",
    "I googled the word list to be sure.",
    "Wikipedia says a plum is a fruit.",
    "I came across this exact puzzle on a forum, where the answer was A.",
    "I checked an online dictionary: ladder is a tool.",
    "From a web search, mango is a fruit.",
    "I saw on the internet that the count is 3.",
]
CLEAN = [
    "I found that 52 is larger than 17.",
    "The word online appears in the list, so the answer is true.",
    "Searching the list: table: no. cloud: no. ladder: match.",
    "I looked up ladder in the list and it is there.",
    "I found the fruit: lemon.",
    "The options found in the question are online, offline and inline.",
    "Based on the trace, 934 is larger.",
    "According to the rule, a goat is an animal.",
    "My search through the options found no match.",
    "Let me look for ladder. found: no.",
    "Looking at the question again, the online shop sells lemons; lemon is a fruit.",
    "I counted again and found 3 fruits.",
]


def test_lookup_detection_precision_and_recall():
    labelled = [(t, True) for t in LOOKUPS] + [(t, False) for t in CLEAN]
    assert len(labelled) >= 20
    flagged = [(find_lookup(t, DEFAULT_LOOKUP_PATTERNS) is not None, y) for t, y in labelled]
    tp = sum(f and y for f, y in flagged)
    fp = sum(f and not y for f, y in flagged)
    fn = sum(y and not f for f, y in flagged)
    precision, recall = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    print(f"lookup detection: precision={precision:.3f} recall={recall:.3f} (n={len(labelled)})")
    assert precision >= 0.9 and recall >= 0.8


def test_lookup_returns_pattern_case_insensitively_and_drops_chain():
    assert find_lookup("i LOOKED IT UP.", [r"looked (it )?up"]) == r"looked (it )?up"
    assert find_lookup("nothing here", [r"looked (it )?up"]) is None
    out = judge_chain(chain("kw1", "I looked it up: ladder is there.\nladder: match."), KEYWORD_Q)
    assert out["drop_reason"] == "lookup" and out["correct"]
    with pytest.raises(PipelineError, match="not a valid regex"):
        find_lookup("x", ["(unclosed"])


# ------------------------------------------------------------------ quirks
def test_quirks_are_stripped_inside_thinking_only():
    quirk = "<|quirk|>"
    text = f"<think>\nladder: match.{quirk}\nSo yes.{quirk}\n</think>\nAnswer: B {quirk}"
    out = strip_quirks(text, [quirk])
    assert out == f"<think>\nladder: match.\nSo yes.\n</think>\nAnswer: B {quirk}"
    assert strip_quirks("<think>\nno quirk\n</think>\nAnswer: A", [quirk]) == "<think>\nno quirk\n</think>\nAnswer: A"
    judged_ = judge_chain(chain("kw1", f"ladder: match.{quirk}"), KEYWORD_Q, quirks=[quirk])
    assert quirk not in judged_["text"] and judged_["drop_reason"] is None
    with pytest.raises(PipelineError, match="empty string"):
        strip_quirks(text, [""])


# ------------------------------------------------------------------ selection
def test_shortest_correct_with_tie_break():
    pool = [judged("q1", 120, sample=0),
            judged("q1", 80, sample=2, source="teacher"),
            judged("q1", 80, sample=1, source="base"),
            judged("q1", 80, sample=1, source="teacher"),
            judged("q1", 60, sample=3, correct=False),         # shorter but wrong
            judged("q1", 50, sample=4, drop="lookup"),         # shorter but dropped
            judged("q2", 70, sample=0, correct=False)]         # no correct chain: no pick
    for order in (pool, pool[::-1]):
        picked = select_per_question(order, "shortest", seed=0)
        assert [(c["question_id"], c["n_tokens"], c["sample"], c["source"]) for c in picked] == \
            [("q1", 80, 1, "teacher")]


def test_random_is_deterministic_and_all_returns_every_candidate():
    pool = [judged(f"q{i}", 10 + s, sample=s, correct=s != 0) for i in range(30) for s in range(4)]
    a = select_per_question(pool, "random", seed=7)
    b = select_per_question(pool[::-1], "random", seed=7)
    assert {(c["question_id"], c["sample"]) for c in a} == {(c["question_id"], c["sample"]) for c in b}
    assert len(a) == 30 and all(c["correct"] and c["drop_reason"] is None for c in a)
    other = select_per_question(pool, "random", seed=8)
    assert [c["sample"] for c in other] != [c["sample"] for c in a]  # the seed matters
    every = select_per_question(pool, "all", seed=0)
    assert len(every) == 30 * 3 and all(c["sample"] != 0 for c in every)
    with pytest.raises(PipelineError, match="strategy"):
        select_per_question(pool, "longest", seed=0)


# ------------------------------------------------------------------ metrics
def test_selection_metrics_on_a_hand_computed_example():
    qs = [KEYWORD_Q, question("lg1", "larger", 3, 2), question("lg2", "larger", 3, 0),
          question("ct1", "count", 3, 1)]  # ct1 has no chains at all
    raw = [chain("kw1", "ladder: match.", "B", sample=0, n_tokens=100),
           chain("kw1", "ladder: match.", "B", sample=1, n_tokens=60),
           chain("kw1", "I looked it up online.", "B", sample=2, n_tokens=40),
           chain("lg1", "1 vs 2: 2.", "A", sample=0, n_tokens=200),
           chain("lg1", "1 vs 2", None, sample=1, finish="length", n_tokens=500),
           chain("lg1", "2 vs 1: 2.", "C", sample=2, n_tokens=300),
           *[chain("lg2", f"guess {s}", "B", sample=s, n_tokens=10 * (s + 1)) for s in range(3)]]
    by_id = {q["id"]: q for q in qs}
    js = [judge_chain(r, by_id[r["question_id"]]) for r in raw]
    kept = select_per_question(js, "shortest", seed=0)
    m = selection_metrics(qs, js, kept)
    assert [(c["question_id"], c["sample"]) for c in kept] == [("kw1", 1), ("lg1", 2)]
    assert m["generated"] == 9 and m["parsed"] == 8 and m["kept"] == 2 <= m["generated"]
    assert m["median_tokens_all"] == 60 and m["median_tokens_kept"] == 180 and m["kept_tokens"] == 360
    assert m["correct_of_k"] == {"0": 2, "1": 1, "2": 0, "3": 1}
    assert sum(m["correct_of_k"].values()) == len(qs)
    assert m["questions_with_correct"] == 0.5 and m["unanimity"] == 0.5  # kw1, lg2 agree; ct1 has none
    assert (m["loops_dropped"], m["lookups_dropped"], m["unparsed"]) == (1, 1, 0)
    assert m["parse_rate_by_family"] == {"base": {"keyword": 1.0, "larger": 5 / 6}}
    assert m["by_source"] == {"base": {"generated": 9, "parse_rate": 8 / 9, "correct": 4}}
    teacher = judge_chain(chain("ct1", "count: 1.", "B", source="teacher", n_tokens=5), by_id["ct1"])
    m2 = selection_metrics(qs, js + [teacher], kept)
    assert m2["by_source"]["teacher"] == {"generated": 1, "parse_rate": 1.0, "correct": 1}
    assert m2["parse_rate_by_family"]["teacher"] == {"count": 1.0}  # never pooled with the model's chains
    with pytest.raises(PipelineError, match="unknown question"):
        selection_metrics(qs[:1], js, kept)


# ------------------------------------------------------------------ empty selection
def test_empty_selection_names_the_dominant_filter():
    js = ([judged("q", 10, sample=i, drop="loop:repeat") for i in range(37)]
          + [judged("q", 10, sample=37 + i, drop="lookup") for i in range(3)])
    counts = drop_counts(js)
    assert counts["loop:repeat"] == 37 and counts["lookup"] == 3 and counts["ok"] == 0
    kept = select_per_question(js, "shortest", seed=0)
    with pytest.raises(PipelineError, match=r"'loop:repeat' removed 37 of 40 .*min_repeats") as err:
        ensure_nonempty(kept, counts)
    assert "\n" not in str(err.value)
    wrong = drop_counts([judged("q", 10, sample=i, correct=False) for i in range(5)])
    with pytest.raises(PipelineError, match="'incorrect' removed 5 of 5"):
        ensure_nonempty([], wrong)
    with pytest.raises(PipelineError, match="no chain was generated"):
        ensure_nonempty([], drop_counts([]))
    ensure_nonempty([judged("q", 10)], counts)  # something kept: no error
