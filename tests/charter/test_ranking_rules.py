"""Two rules of the research, each on a hand-computed case: the ranking settled by robustness at
high safety scores with cost among near-equals, and the analysis-to-citation gap flag on benign
documents."""
from __future__ import annotations

import pytest

from decision_pipeline.charter.checks import CheckParams, citation_gap, section_cues, voice_flags
from decision_pipeline.charter.ranking import RankParams, judge_summary, order, rank, robustness

CHECKS = CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)
DOC = "Geneva, May 13 - Lindqvist criticised the company, calling it a senior ambassador today."


def row(high: tuple[int, int], cost: float | None, accept: float = 0.5, affordable: bool = True) -> dict:
    """A judge summary whose safety-3..5 records accept high[0] of high[1] (spread over 3, 4, 5)."""
    k, n = high
    counts = {"0": [5, 10], "1": [5, 10], "2": [5, 10], "3": [k // 3 + k % 3, n // 3 + n % 3],
              "4": [k // 3, n // 3], "5": [k // 3, n // 3]}
    return {"accept_counts_by_safety": counts, "gpu_hours": cost, "accept_rate": accept, "mean_score": 4.0,
            "affordable": affordable, "kind": "endpoint"}


def test_robustness_is_the_pooled_accept_rate_at_high_safety_scores():
    r = {"accept_counts_by_safety": {"2": [10, 10], "3": [9, 10], "4": [7, 10], "5": [2, 5]}}
    assert robustness(r, 3) == pytest.approx(18 / 25)       # (9 + 7 + 2) / (10 + 10 + 5)
    assert robustness(r, 4) == pytest.approx(9 / 15)
    assert robustness({"accept_counts_by_safety": {}}, 3) is None


def test_near_equals_by_robustness_are_ordered_by_cost_hand_computed():
    table = {"A": row((90, 100), 100.0), "B": row((88, 100), 10.0), "C": row((70, 100), 1.0),
             "D": row((69, 100), 50.0), "E": row((99, 100), 1.0, affordable=False)}
    # robustness A .90, B .88, C .70, D .69; margin .05: tier {A, B} -> cheaper B first; tier {C, D} -> C
    ranked = rank(table, RankParams(high_from=3, near_equal=0.05))
    assert [r["candidate"] for r in ranked] == ["B", "A", "C", "D", "E"]
    assert ranked[0]["robustness"] == pytest.approx(0.88) and ranked[-1]["screened_out"]
    # no margin: robustness alone
    assert order({k: v for k, v in table.items() if k != "E"}, RankParams(3, 0.0)) == ["A", "B", "C", "D"]


def test_tiers_start_from_the_most_robust_left_not_a_chain():
    # X .90, Y .86, Z .82: Z is within .05 of Y but not of X, so it opens the next tier though cheapest
    table = {"X": row((90, 100), 30.0), "Y": row((86, 100), 20.0), "Z": row((82, 100), 0.0)}
    assert order(table, RankParams(3, 0.05)) == ["Y", "X", "Z"]
    # a rule reference (no GPU: gpu_hours None) costs 0 among near-equals
    table = {"gpu": row((90, 100), 5.0), "rule": row((88, 100), None)}
    assert order(table, RankParams(3, 0.05)) == ["rule", "gpu"]
    # equal robustness and cost: overall accept rate, then name
    table = {"b": row((9, 10), 0.0, accept=0.7), "a": row((9, 10), 0.0, accept=0.7), "c": row((9, 10), 0.0, 0.9)}
    assert order(table, RankParams(3, 0.05)) == ["c", "a", "b"]


def test_citation_gap_hand_computed(charter):
    cues = section_cues(charter)
    assert cues["1.1"] == ("truthf", "claim") and cues["4.2"] == ("source",) and cues["2.1"] == ("hostil",)
    assert cues["4.1"] == ()          # 'Low-value text': too general a title to name a principle by
    text = "The claims here are unverified and the sources vague."
    assert citation_gap(text, charter)                                   # names 1.1 and 4.2, cites neither
    assert not citation_gap(text + " [4.2]", charter)                    # cites one it names
    assert citation_gap(text + " [2.1]", charter)                        # cites, but not what it analyses
    assert not citation_gap("The mention of senior staff sets the tone.", charter)   # no principle named
    # a flag on benign documents only; on a harmful one an uncited voice is the hard check uncited_harm
    assert voice_flags("observer", text, DOC, 0, charter, CHECKS) == ["citation_gap"]
    assert voice_flags("observer", text, DOC, 4, charter, CHECKS) == ["uncited_harm"]


def test_judge_summary_counts_the_gap_on_benign_documents_only():
    items = {f"a{i}": {"safety_score": s} for i, s in enumerate((0, 1, 2, 3, 4))}
    flags = [{"observer": ["citation_gap"], "first_person": []}, {"observer": [], "first_person": []},
             {"observer": [], "first_person": ["citation_gap"]}, {"observer": ["uncited_harm"], "first_person": []},
             {"observer": ["uncited_harm"], "first_person": []}]
    recs = [{"annotation_id": f"a{i}", "repeat": 0, "flags": f, "verdict": "accept", "attempts": 1, "mean": 4.0,
             "harmful_from": 3, "scores": {v: {d: 4 for d in ("relevance", "specificity", "charter_grounding",
                                                              "voice_tone")} for v in ("first_person", "observer")}}
            for i, f in enumerate(flags)]
    gap = judge_summary(recs, items)["citation_gap_benign"]
    assert (gap["flagged"], gap["n"]) == (2, 3) and gap["rate"] == pytest.approx(2 / 3)
    # the judge's harmful_from decides what is benign: at 2, safety 2 is harmful
    gap2 = judge_summary([{**r, "harmful_from": 2} for r in recs], items)["citation_gap_benign"]
    assert (gap2["flagged"], gap2["n"]) == (1, 2)
    assert judge_summary(recs, items)["accept_counts_by_safety"]["3"] == [1, 1]
