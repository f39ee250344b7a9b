"""Budgeted selection: modes, exact budget, reserve, tie-breaks, determinism, bad inputs."""
from __future__ import annotations

import dataclasses

from collections import Counter

import numpy as np
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.curation.classifier import score_docs, train_classifier
from decision_pipeline.curation.filters import apply_filters, build_filters
from decision_pipeline.curation.minhash import dedup
from decision_pipeline.curation.documents import REGISTERS, generate_dev, generate_pool
from decision_pipeline.curation.selection import (calibrate_chars_per_token, estimate_token_counts, quantize_scores,
                                       random_selection, select)

from .conftest import CLASSIFIER, MINHASH

REGS = list(REGISTERS)


@pytest.fixture(scope="module")
def scored(deduped, model):
    docs = deduped.kept
    return docs, score_docs(model, docs), estimate_token_counts([d["text"] for d in docs], 4.0)


def _budget_exact(sel, docs, tokens, budget):
    tok = dict(zip([d["id"] for d in docs], tokens.tolist()))
    counts = [tok[i] for i in sel.ids[:sel.n_budget_docs]]
    assert sum(counts) >= budget > sum(counts[:-1])
    assert sel.stats["n_tokens"] == sum(counts) and sel.stats["n_docs"] == sel.n_budget_docs


def test_docs_mode_equal_counts_round_robin(scored):
    docs, s, tok = scored
    sel = select(docs, s, tok, 150_000, REGS, mode="docs", overfill=1.0, reserve=0.0)
    _budget_exact(sel, docs, tok, 150_000)
    assert sel.stats["reserve_used_docs"] == 0 and sel.stats["exhausted"] is None
    home = {d["id"]: REGS[int(a)] for d, a in zip(docs, s.argmax(axis=1))}
    order = [home[i] for i in sel.ids[:sel.n_budget_docs]]
    assert order == [REGS[k % 4] for k in range(len(order))]  # round-robin in register order
    counts = [v["docs"] for v in sel.stats["per_register"].values()]
    assert max(counts) - min(counts) <= 1
    by_reg = {r: [i for i in sel.ids[:sel.n_budget_docs] if home[i] == r] for r in REGS}
    sc = {d["id"]: quantize_scores(row) for d, row in zip(docs, s)}
    for r, ids in by_reg.items():  # each register takes its best home docs first
        keys = [(-int(sc[i][REGS.index(r)]), i) for i in ids]
        assert keys == sorted(keys)


def test_tokens_mode_equal_token_share(scored):
    docs, s, tok = scored
    sel = select(docs, s, tok, 150_000, REGS, mode="tokens", overfill=1.0, reserve=0.0)
    _budget_exact(sel, docs, tok, 150_000)
    shares = [v["tokens"] / 150_000 for v in sel.stats["per_register"].values()]
    assert max(shares) - min(shares) < 0.02
    docs_mode = select(docs, s, tok, 150_000, REGS, mode="docs", overfill=1.0, reserve=0.0)
    assert sel.stats["per_register"] != docs_mode.stats["per_register"]


def test_pooled_mode_single_ranking(scored):
    docs, s, tok = scored
    sel = select(docs, s, tok, 100_000, REGS, mode="pooled", overfill=1.0, reserve=0.0)
    _budget_exact(sel, docs, tok, 100_000)
    best = dict(zip([d["id"] for d in docs], quantize_scores(s).max(axis=1).tolist()))
    keys = [(-best[i], i) for i in sel.ids]
    assert keys == sorted(keys)


def test_overfill_limits_depth_and_reserve_fills(scored):
    docs, s, tok = scored
    sel = select(docs, s, tok, 150_000, REGS, mode="docs", overfill=0.1, reserve=0.05)
    _budget_exact(sel, docs, tok, 150_000)
    st = sel.stats
    assert st["exhausted"] in REGS and st["reserve_used_docs"] > 0
    assert st["n_primary_docs"] + st["reserve_used_docs"] == st["n_docs"]
    home = Counter(s.argmax(axis=1).tolist())
    assert st["candidates"] == {r: int(np.ceil(0.1 * home[k])) for k, r in enumerate(REGS)}
    prim = [v["docs"] for v in st["primary_per_register"].values()]
    assert max(prim) - min(prim) <= 1
    assert st["tail_tokens"] >= 0.05 * 150_000 and len(sel.ids) == st["n_docs"] + st["tail_docs"]
    assert len(set(sel.ids)) == len(sel.ids)


def test_tie_break_is_id_ascending_and_scores_quantised():
    ids = ["d", "b", "c", "a"]
    s = np.array([[0.5, 0.1], [0.5 + 1e-9, 0.1], [0.5, 0.1], [0.5 - 1e-9, 0.1]])  # equal after quantising
    sel = select(ids, s, np.ones(4, dtype=np.int64), 4, ["x", "y"], mode="pooled", overfill=1.0, reserve=0.0)
    assert sel.ids == ["a", "b", "c", "d"]
    assert quantize_scores(np.array([0.1234564, 0.1234566])).tolist() == [123456, 123457]


def test_registers_claim_in_fixed_order_on_ties():
    s = np.array([[0.4, 0.4], [0.4, 0.4], [0.1, 0.6]])
    sel = select(["p", "q", "r"], s, np.array([1, 1, 1]), 3, ["first", "second"], mode="docs", overfill=1.0, reserve=0.0)
    assert sel.stats["per_register"] == {"first": {"docs": 2, "tokens": 2}, "second": {"docs": 1, "tokens": 1}}
    assert sel.ids == ["p", "r", "q"]


def test_budget_too_large_says_what_is_available(scored):
    docs, s, tok = scored
    with pytest.raises(PipelineError, match=f"exceeds the {int(tok.sum())} tokens available") as e:
        select(docs, s, tok, int(tok.sum()) + 1, REGS, mode="docs", overfill=1.0, reserve=0.0)
    assert "budget_tokens" in str(e.value)
    with pytest.raises(PipelineError, match="tokens available"):
        random_selection(docs, tok, int(tok.sum()) + 1, np.random.default_rng(0), reserve=0.0)
    whole = select(docs, s, tok, int(tok.sum()), REGS, mode="docs", overfill=1.0, reserve=0.1)
    assert whole.n_budget_docs == len(docs) and whole.stats["tail_short"]


@pytest.mark.parametrize("kwargs, msg", [
    ({"mode": "greedy"}, "unknown mode 'greedy'"), ({"overfill": 1.5}, "overfill"), ({"overfill": 0}, "overfill"),
    ({"budget": 0}, "budget_tokens"), ({"reserve": -1}, "reserve"),
])
def test_bad_selection_params(scored, kwargs, msg):
    docs, s, tok = scored
    args = {"budget": 1000, "mode": "docs", "overfill": 1.0, "reserve": 0.0, **kwargs}
    with pytest.raises(PipelineError, match=msg):
        select(docs, s, tok, args.pop("budget"), REGS, **args)


def test_bad_shapes(scored):
    docs, s, tok = scored
    with pytest.raises(PipelineError, match="token_counts"):
        select(docs, s, tok[:-1], 1000, REGS, mode="docs", overfill=1.0, reserve=0.0)
    with pytest.raises(PipelineError, match="scores have shape"):
        select(docs, s[:, :3], tok, 1000, REGS, mode="docs", overfill=1.0, reserve=0.0)
    with pytest.raises(PipelineError, match="NaN"):
        select(docs, s * np.nan, tok, 1000, REGS, mode="docs", overfill=1.0, reserve=0.0)


def test_random_selection(scored):
    docs, s, tok = scored
    a = random_selection(docs, tok, 50_000, np.random.default_rng(9), reserve=0.1, scores=s, registers=REGS)
    b = random_selection(docs, tok, 50_000, np.random.default_rng(9), reserve=0.1, scores=s, registers=REGS)
    assert a.to_json() == b.to_json()
    _budget_exact(a, docs, tok, 50_000)
    assert sum(v["docs"] for v in a.stats["per_register"].values()) == a.n_budget_docs
    assert a.stats["tail_tokens"] >= 5_000


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
