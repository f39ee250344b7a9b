"""The artifact-token diagnosis: each kind on a hand-counted text, shares per register, what the default
generator writes, and the ingest metrics (pool, dev, held-out, tune)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from decision_pipeline.curation.artifacts import KINDS, artifact_shares, count_artifacts, source_register
from decision_pipeline.curation.documents import DEFAULT_NOISE_WEIGHTS, IngestParams, generate_pool, ingest
from decision_pipeline.curation.minhash import MinhashParams

# 32 whitespace tokens, 18 of them artifacts, counted by hand:
#   replacement_char: caf\ufffd, CafÃ©          2      unk: <unk>                          1
#   markup: &amp; <br> &#39;                      3      wikitext_at: @-@ @,@                2
#   split_contraction: n't 's                     2      space_before_punct: , ... )        3
#   symbol_run: ## => |-|                         3      separator: | »                      2
# not artifacts: the dateline "-", forum ">", "#42", "$19.99", "0x3f", "word," and 9 words (14)
TEXT = ("Lisbon - he did n't say , it 's caf\ufffd CafÃ© <unk> &amp; <br> x&#39;s 2 @-@ 3 @,@ 4 ... ## => |-| "
        "| » ) > #42 $19.99 0x3f word,")
EXPECTED = {"replacement_char": 2, "unk": 1, "markup": 3, "wikitext_at": 2, "split_contraction": 2,
            "space_before_punct": 3, "symbol_run": 3, "separator": 2}


def test_each_kind_on_a_hand_counted_text():
    tokens, kinds = count_artifacts(TEXT)
    assert tokens == 32
    assert dict(kinds) == EXPECTED and set(kinds) == set(KINDS)
    assert count_artifacts("") == (0, Counter())
    # the kinds are whole tokens: punctuation attached to a word, a hyphenated word, an apostrophe inside one
    assert count_artifacts("well, don't re-use it. (fine) 50% cat's") == (7, Counter())


def test_shares_pool_tokens_per_register_by_hand():
    docs = [("news", "a , b c"), ("news", "d e f g h i"), ("forum", "## x"), ("forum", "y z")]
    out = artifact_shares(docs)
    # overall: 2 artifacts ("," and "##") of 4 + 6 + 2 + 2 = 14 tokens, in 2 of 4 documents
    assert (out["tokens"], out["artifact_tokens"], out["share"], out["docs"], out["docs_with_artifacts"]) == \
        (14, 2, round(2 / 14, 6), 4, 2)
    assert out["kinds"] == {"space_before_punct": 1, "symbol_run": 1}
    assert list(out["by_register"]) == ["forum", "news"]
    assert out["by_register"]["news"]["share"] == 0.1 and out["by_register"]["forum"]["share"] == 0.25
    assert artifact_shares([])["share"] == 0.0


def test_the_default_generator_writes_artifacts_only_into_its_web_noise():
    pool = generate_pool(1500, 0.5, np.random.default_rng(11))
    by_kind: dict[str, Counter] = {}
    for d in pool:
        by_kind.setdefault(d["meta_kind"], Counter()).update(count_artifacts(d["text"])[1])
    assert not by_kind["clean"] and not by_kind["near_dup"] and not by_kind["repeated"]
    assert by_kind["junk"]["symbol_run"] > 0 and by_kind["boilerplate"]["separator"] > 0
    assert set(by_kind["junk"]) | set(by_kind["boilerplate"]) <= {"symbol_run", "separator", "space_before_punct"}


def test_source_register_reads_the_generator_label_or_says_unlabelled():
    assert source_register({"meta_register": "qa"}) == "qa"
    assert source_register({"meta_json": '{"meta_register": "noise", "meta_kind": "junk"}'}) == "noise"
    assert source_register({"meta_json": "{}"}) == source_register({"meta_json": "not json"}) == "unlabelled"


def test_ingest_reports_the_shares_of_pool_dev_heldout_and_tune():
    p = IngestParams(n_docs=300, noise_fraction=0.4, noise_weights=dict(DEFAULT_NOISE_WEIGHTS), dev_per_register=3,
                     heldout_per_register=6,
                     heldout_fraction=0.5, dev_registers=["news", "qa", "reasoning"],
                     register_weights={"news": 1.0, "reasoning": 1.0}, external_pool="", external_dev="",
                     seed_offset=0, tune_fraction=0.5)
    pool, dev, heldout, tune, metrics = ingest(p, seed=5, minhash=MinhashParams(num_perm=64, bands=16, rows=4, ngram=5))
    a = metrics["artifacts"]
    assert set(a) == {"pool", "dev", "heldout", "tune"}
    assert a["heldout"]["docs"] == len(heldout) and a["tune"]["docs"] == len(tune) and a["dev"]["docs"] == len(dev)
    assert a["heldout"]["share"] == a["tune"]["share"] == a["dev"]["share"] == 0.0  # generated clean text
    total = sum(count_artifacts(r["text"])[1].total() for r in pool)
    assert a["pool"]["artifact_tokens"] == total > 0
    assert a["pool"]["share"] == pytest.approx(total / sum(len(r["text"].split()) for r in pool), abs=1e-6)
    assert {"news", "reasoning", "noise"} <= set(a["pool"]["by_register"])
    assert a["pool"]["by_register"]["noise"]["artifact_tokens"] == total  # only the noise pages carry them
