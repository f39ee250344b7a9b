"""The research's fill rules on a hand-made 12-document pool (expected selections computed by hand),
plus determinism, exact budgets and bad inputs on the generated pool.

Hand-made pool, registers A, B, C (integer scores pass quantisation unchanged):

    doc   A   B   C  tokens        A ranking: d00 d01 d02 d03 d07 d08 d09 d04 d05 d06 d10
    d00  90  10   5  10            B ranking: d01 d04 d05 d06 d03 d02 d00 d08 d07 d09 d10
    d01  80  85   5  10            C ranking: d07 d08 d09 d03 d05 d02 d04 d00 d01 d10 d06
    d02  70  20  10  10            sum ranking (pooled): d01 d03 d07 d00 d02 d08 d04 d09 d05 d06 d10
    d03  60  30  20  10
    d04   5  70  10  10            d01 is B's best but A's second: a first-come conflict A wins
    d05   5  60  15  10            whenever A's list reaches it. d07 (25 tokens) alone fills C's
    d06   5  50   0  10            depth at overfill 1, so C's list is exhausted after one round.
    d07  10   5  95  25            d11 is ineligible (valid=False) though its sum would rank 2nd.
    d08   8   6  80  10
    d09   7   4  70  10
    d10   3   3   3  10
    d11  50  40  60  10  (invalid)
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pyarrow as pa
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.curation.classifier import score_docs, train_classifier
from decision_pipeline.curation.documents import REGISTERS, generate_dev, generate_pool
from decision_pipeline.curation.filters import apply_filters, build_filters
from decision_pipeline.curation.minhash import dedup
from decision_pipeline.curation.selection import (calibrate_chars_per_token, estimate_from_lengths, estimate_token_counts,
                                                  quantize_scores, random_selection, select)

from .conftest import CLASSIFIER, MINHASH

REGS = list(REGISTERS)
IDS = [f"d{i:02d}" for i in range(12)]
S = np.array([[90, 10, 5], [80, 85, 5], [70, 20, 10], [60, 30, 20], [5, 70, 10], [5, 60, 15], [5, 50, 0],
              [10, 5, 95], [8, 6, 80], [7, 4, 70], [3, 3, 3], [50, 40, 60]], dtype=np.int64)
TOK = np.array([10] * 7 + [25] + [10] * 4, dtype=np.int64)
VALID = np.array([True] * 11 + [False])
ABC = ["A", "B", "C"]


def _sel(budget, token_counts=TOK, docs=IDS, **kw):
    args = {"mode": "docs", "overfill": 1.0, "reserve": 0.0, "valid": VALID, **kw}
    return select(docs, S, token_counts, budget, ABC, **args)


def test_docs_first_come_conflict_round_robin_and_tail():
    # depth 60*1/3 = 20: A=[d00,d01] (takes d01 first), B skips d01 -> [d04,d05], C=[d07] (25 >= 20).
    # Round 1: d00 d04 d07 (45); C is exhausted, round 2 continues: d01 (55), d05 (65 >= 60): stop.
    # Reserve 0.5*60 = 30 tokens from the end of the lists (65), round-robin down the full rankings: A d02,
    # B d06, C d08; the budget used none of it, so all of it is the tail.
    sel = _sel(60, reserve=0.5)
    assert sel.ids == ["d00", "d04", "d07", "d01", "d05", "d02", "d06", "d08"]
    st = sel.stats
    assert sel.n_budget_docs == 5 and st["n_tokens"] == 65 and st["fallback_docs"] == 0
    assert st["tail_docs"] == 3 and st["tail_tokens"] == 30 and st["reserve_tokens"] == 30
    assert not st["reserve_short"] and st["fallback_tokens"] == 0 and st["fallback_share"] == 0.0
    assert st["by_list"]["A"] == {"docs": 2, "tokens": 20, "own_docs": 1, "continuation_docs": 1,
                                  "reserve_used_docs": 0, "list_docs": 2, "list_depth_tokens": 20, "exhausted": True}
    assert st["by_list"]["C"]["docs"] == 1 and st["by_list"]["C"]["exhausted"]
    # by argmax d01 is B's; by the list that picked it, it is A's
    assert st["argmax_mix"] == {"A": {"docs": 1, "tokens": 10}, "B": {"docs": 3, "tokens": 30},
                                "C": {"docs": 1, "tokens": 25}}


def test_docs_low_overfill_no_conflict_and_fallback():
    # depth 10: A=[d00], B=[d01] (not owned now), C=[d07]: 45 tokens; lists exhausted, the reserve
    # round-robin fills: A d02 (55), B d04 (65): 2 fallback documents.
    sel = _sel(60, overfill=0.5)
    assert sel.ids == ["d00", "d01", "d07", "d02", "d04"]
    assert sel.stats["fallback_docs"] == 2
    assert [sel.stats["by_list"][r]["reserve_used_docs"] for r in ABC] == [1, 1, 0]


def test_reserve_counts_from_the_end_of_the_lists():
    # the research's rule: depth 10 -> lists d00 d01 d07 (45 tokens). The reserve is 0.5*60 = 30 tokens
    # counted from there (to 75): A d02 (55), B d04 (65), C d08 (75). The budget cut (65) takes d02 and d04
    # from it (fallback 20 of 65 tokens); the tail is d08 alone. Counted from the budget cut instead it
    # would run to 95 and also hold d03 and d05.
    sel = _sel(60, overfill=0.5, reserve=0.5)
    assert sel.ids == ["d00", "d01", "d07", "d02", "d04", "d08"] and sel.n_budget_docs == 5
    st = sel.stats
    assert (st["fallback_docs"], st["fallback_tokens"], st["fallback_share"]) == (2, 20, round(20 / 65, 6))
    assert (st["reserve_tokens"], st["reserve_short"], st["tail_docs"], st["tail_tokens"]) == (30, False, 1, 10)


def test_docs_continues_past_exhausted_list():
    # budget 75, depth 25: A=[d00 d01 d02], B=[d04 d05 d06], C=[d07] (25 est tokens).
    # Round 1: d00 d04 d07 (45); C exhausted, the round-robin goes on over A, B: d01 d05 | d02 (75 >= 75).
    sel = _sel(75)
    assert sel.ids == ["d00", "d04", "d07", "d01", "d05", "d02"]
    bl = sel.stats["by_list"]
    assert (bl["A"]["own_docs"], bl["A"]["continuation_docs"]) == (1, 2)
    assert [bl[r]["exhausted"] for r in ABC] == [True, False, True]
    assert sel.stats["fallback_docs"] == 0


def test_tokens_mode_quotas():
    # weights .5/.25/.25 of 60: quotas 30/15/15 = depths. A=[d00 d01 d02], B=[d04 d05], C=[d07].
    # Next = smallest filled share (ties: earlier): A d00, B d04, C d07 (C 25/15), A d01 (A .67),
    # A d02 (tie .67 with B: A first) -> 65 >= 60.
    sel = _sel(60, mode="tokens", weights={"A": 0.5, "B": 0.25, "C": 0.25})
    assert sel.ids == ["d00", "d04", "d07", "d01", "d02"]
    assert {r: v["tokens"] for r, v in sel.stats["by_list"].items()} == {"A": 30, "B": 10, "C": 25}


def test_pooled_is_sum_not_max():
    # sums: d01 170, d03 110 = d07 110 (tie: id ascending), d00 105, d02 100 -> 65 >= 60
    # (max would start d07 d00 d01 d08; d11's sum 150 would rank 2nd but it is ineligible)
    sel = _sel(60, mode="pooled")
    assert sel.ids == ["d01", "d03", "d07", "d00", "d02"]
    assert list(sel.stats["by_list"]) == ["pooled"]


def test_budget_cut_uses_exact_tokens():
    # estimates set the same lists as the first test; d07 is really 5 tokens, so the lists hold 45
    # exact tokens and the reserve adds A d02 (55), B d06 (65).
    exact = TOK.copy()
    exact[7] = 5
    sel = _sel(60, exact_tokens=exact)
    assert sel.ids == ["d00", "d04", "d07", "d01", "d05", "d02", "d06"]
    assert sel.stats["n_tokens"] == 65 and sel.stats["n_tokens_est"] == 85 and sel.stats["fallback_docs"] == 2


def test_exact_depths_need_no_fallback():
    # the same pool with depths counted in exact tokens (curate.depth_count: exact): d07 is 5 tokens, so C's
    # depth of 20 takes d07 d08 d09 (25); A=[d00 d01], B=[d04 d05]. Round-robin d00 d04 d07 | d01 d05 d08 |
    # d09: 65 >= 60 with no reserve document (the estimated-depth case above needed 2).
    exact = TOK.copy()
    exact[7] = 5
    sel = _sel(60, token_counts=exact, exact_tokens=exact)
    assert sel.ids == ["d00", "d04", "d07", "d01", "d05", "d08", "d09"]
    assert sel.stats["fallback_docs"] == 0 and sel.stats["n_tokens"] == 65
    assert sel.stats["by_list"]["C"]["list_depth_tokens"] == 25 and sel.stats["by_list"]["C"]["docs"] == 3


def test_registers_claim_ties_in_order_and_id_ascending():
    s = np.array([[4, 4], [4, 4], [1, 6]])
    sel = select(["q", "p", "r"], s, np.array([1, 1, 1]), 3, ["first", "second"], overfill=1.3, reserve=0.0)
    # depth 1.3*3/2 = 1.95: first=[p, q] (tie -> id ascending), second=[r]
    assert sel.ids == ["p", "r", "q"]
    assert quantize_scores(np.array([0.1234564, 0.1234566])).tolist() == [123456, 123457]


@pytest.mark.parametrize("kw, msg", [
    ({"mode": "greedy"}, "curate.mode: unknown mode 'greedy'"), ({"overfill": 0}, "curate.overfill: got 0"),
    ({"reserve": -1}, "curate.reserve: got -1"), ({"mode": "tokens", "weights": {"A": 0.5, "B": 0.2}}, "sum to 0.7"),
    ({"mode": "tokens", "weights": {"A": 0.5, "Z": 0.5}}, r"unknown register\(s\) \['Z'\]"),
])
def test_bad_params(kw, msg):
    with pytest.raises(PipelineError, match=msg):
        _sel(60, **kw)


def test_budget_pool_cannot_fill():
    # eligible tokens: 9*10 + 25 + 10 = 125 (d11 excluded)
    with pytest.raises(PipelineError, match="126 exceeds the 125 tokens of the 11 eligible"):
        _sel(126)
    assert _sel(125, reserve=1.0).stats["reserve_short"]


@pytest.fixture(scope="module")
def scored(deduped, model):
    docs = deduped.kept
    return docs, score_docs(model, docs), estimate_token_counts([d["text"] for d in docs], 4.0)


@pytest.mark.parametrize("mode", ["docs", "tokens", "pooled"])
def test_generated_pool_budget_exact_and_disjoint(scored, mode):
    docs, s, tok = scored
    sel = select(docs, s, tok, 150_000, REGS, mode=mode, overfill=1.6, reserve=0.1)
    t = dict(zip([d["id"] for d in docs], tok.tolist()))
    counts = [t[i] for i in sel.ids[:sel.n_budget_docs]]
    assert sum(counts) >= 150_000 > sum(counts[:-1])
    assert len(set(sel.ids)) == len(sel.ids) and sel.stats["tail_tokens"] >= 15_000
    assert sum(v["docs"] for v in sel.stats["by_list"].values()) == sel.n_budget_docs


def test_random_selection(scored):
    docs, s, tok = scored
    a = random_selection(docs, tok, 50_000, np.random.default_rng(9), reserve=0.1, scores=s, registers=REGS)
    b = random_selection(docs, tok, 50_000, np.random.default_rng(9), reserve=0.1, scores=s, registers=REGS)
    assert a.to_json() == b.to_json()
    assert sum(v["docs"] for v in a.stats["argmax_mix"].values()) == a.n_budget_docs
    assert a.stats["tail_tokens"] >= 5_000
    with pytest.raises(PipelineError, match="exceeds"):
        random_selection(docs, tok, int(tok.sum()) + 1, np.random.default_rng(0), reserve=0.0)


def test_calibration():
    cpt = calibrate_chars_per_token(["abcdefgh", "abcd"], lambda t: len(t) // 4)
    assert cpt == pytest.approx(4.0)
    assert estimate_token_counts(["abcdefghi", "", "a"], cpt).tolist() == [3, 0, 1]
    with pytest.raises(PipelineError, match="no text"):
        calibrate_chars_per_token([""], len)


def _run_chain(seed: int) -> str:
    pool = generate_pool(600, 0.3, np.random.default_rng(seed))
    dev = generate_dev(25, REGISTERS, np.random.default_rng(seed + 1))
    kept = apply_filters(pool, build_filters({"min_words": {"min": 50}, "alpha_ratio": {"min": 0.7},
                                              "repeated_lines": {"max_dup_line_frac": 0.3},
                                              "boilerplate": {"max_hits": 0}})).kept
    docs = dedup(kept, MINHASH, seed=1).kept
    model = train_classifier(dev, pool, REGS, dataclasses.replace(CLASSIFIER, epochs=3, n_background=25), seed=seed)
    tok = estimate_token_counts([d["text"] for d in docs], 4.2)
    return select(docs, score_docs(model, docs), tok, 40_000, REGS, mode="docs", overfill=1.0, reserve=0.05).to_json()


def test_whole_chain_is_byte_identical():
    assert _run_chain(11).encode() == _run_chain(11).encode()


def test_estimate_from_lengths_is_the_per_text_ceiling():
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 50_000, 2_000)
    for cpt in (1.0, 3.7, 4.2137, 5.5):
        expect = [math.ceil(int(k) / cpt) for k in lengths]
        assert estimate_from_lengths(lengths, cpt).tolist() == expect
    with pytest.raises(PipelineError, match="chars_per_token must be > 0"):
        estimate_from_lengths(lengths, 0.0)


def test_arrow_ids_and_index_give_the_list_selection():
    """The Ray engine passes its id column as Arrow and maps the budget back through `index`."""
    a = _sel(60, reserve=1.0)
    b = _sel(60, reserve=1.0, docs=pa.array(IDS))
    assert a.to_json() == b.to_json() and [IDS[i] for i in b.index] == b.ids
    r = random_selection(pa.chunked_array([IDS[:5], IDS[5:]]), TOK, 40, np.random.default_rng(1), reserve=0.5)
    assert [IDS[i] for i in r.index] == r.ids
    with pytest.raises(PipelineError, match="duplicate doc ids"):
        _sel(60, docs=pa.array(IDS[:11] + ["d00"]))
