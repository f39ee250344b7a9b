"""The `curate` stage's library run: every pool document gets one exact reason, metrics agree with it."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decision_pipeline.curation import pipeline
from decision_pipeline.curation.documents import DEFAULT_NOISE_WEIGHTS, NOISE_KINDS, REGISTERS, IngestParams, ingest
from decision_pipeline.curation.pipeline import ClassifierParams, CurateParams, MinhashParams, curate
from decision_pipeline.common.errors import PipelineError

from tests.micro import micro_params

from .conftest import FILTER_CONFIG


def params(**overrides) -> CurateParams:
    """The micro profile's curate section with what these tests depend on: a 20k budget over the planted pool,
    the filters the reasons are checked against, a small fast classifier (#22: the rest lives in the profile)."""
    values = dict(budget_tokens=20_000, mode="docs", overfill=1.0, reserve=0.1, depth_count="exact",
                  registers=list(REGISTERS), filters={k: dict(v) for k, v in FILTER_CONFIG.items()},
                  classifier=ClassifierParams(n_buckets=4096, epochs=2, lr=2.0, l2=1e-5, n_background=40,
                                              checkpoint="best_heldout"))
    return micro_params(CurateParams, "curate", **{**values, **overrides})


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture(scope="module")
def items():
    """Two held-out questions planted verbatim in pool documents, one pool-split question that is not."""
    return [{"id": "q-eval", "split": "eval", "question": "Which harbour town has the oldest lighthouse",
             "options": [{"text": "Northwick"}, {"text": "Saltmere"}]},
            {"id": "q-pool", "split": "pool", "question": "Which river is the longest",
             "options": [{"text": "Avon"}, {"text": "Tees"}]}]


@pytest.fixture(scope="module")
def planted(pool, items):
    docs = [dict(d) for d in pool]
    docs[0]["text"] += " Which harbour town has the oldest lighthouse? Northwick or Saltmere."
    docs[1]["text"] += " Which river is the longest? Avon or Tees."
    return docs


@pytest.fixture(scope="module")
def runs(planted, dev, items) -> dict:
    """The two library runs on the planted pool (default params, seed 3), shared by the tests that only read
    them; test_same_inputs_same_selection reruns one and compares."""
    return {name: curate(name, planted, dev, items, words, params(), seed=3, provenance={"source": "test"})
            for name in ("curated", "random")}


@pytest.mark.parametrize("name", ["curated", "random"])
def test_every_document_has_one_exact_reason(planted, runs, name):
    result = runs[name]
    reasons = {r["id"]: r["drop_reason"] for r in result.scores_rows}
    assert list(reasons) == [d["id"] for d in planted]                      # one row per pool doc, pool order
    assert reasons[planted[0]["id"]] == "contaminated" and reasons[planted[1]["id"]] != "contaminated"
    counts = Counter(reasons.values())
    m = result.metrics
    assert m["drops"] == {name: counts.get(name, 0) for name in FILTER_CONFIG}   # datatrove-style per filter
    assert set(m["drops"]) == set(FILTER_CONFIG) and all(v > 0 for v in m["drops"].values())
    assert m["decontamination"]["removed_docs"] == counts["contaminated"] == 1
    assert m["after_filters"] == len(planted) - counts["contaminated"] - sum(m["drops"].values())
    assert m["dedup"]["removed"] == counts["near_duplicate"]
    assert m["after_filters"] - m["dedup"]["removed"] == counts[""]
    assert set(counts) == {"", "contaminated", "near_duplicate", *FILTER_CONFIG}
    selected = set(result.selection.ids)
    pickable = {i for i, r in reasons.items() if r == ""} if name == "curated" else \
        {i for i, r in reasons.items() if r != "contaminated"}
    assert selected <= pickable
    scored = {r["id"] for r in result.scores_rows if r["scores_json"] != "{}"}
    assert scored == pickable and set(json.loads(result.scores_rows[2]["scores_json"]) or REGISTERS) <= set(REGISTERS)
    assert result.provenance["selection"] == name and result.provenance["source"] == "test"
    # the budget is counted exactly (here the "tokenizer" counts words) on the documents trained on
    texts = {d["id"]: d["text"] for d in planted}
    trained = result.selection.ids[:result.selection.n_budget_docs]
    assert m["selected_tokens"] == sum(words(texts[i]) for i in trained) >= 20_000
    assert m["selected_tokens"] - words(texts[trained[-1]]) < 20_000
    assert m["selected_chars_per_token"] == round(sum(len(texts[i]) for i in trained) / m["selected_tokens"], 4)
    # exact depths at overfill 1.0: the lists hold the whole budget, so no reserve document is needed
    assert m["fallback_docs"] == sum(v.get("reserve_used_docs", 0) for v in m["register_mix"].values()) == 0
    assert m["rule"]["depth_count"] == ("exact" if name == "curated" else None)
    assert m["reserve_tail_tokens"] >= 2_000
    assert sum(v["docs"] for v in m["register_mix"].values()) == m["selected_docs"]
    assert m["register_mix_by"] == ("list" if name == "curated" else "argmax")


def test_estimated_depths_fall_short_deeper_lists_do_not(dev, items):
    # the research's literal rule: depths in chars/token estimates. When the calibration sample has fewer
    # characters per "token" (word) than the selection, overfill 1.0 lists fall short. A pool whose noise is
    # symbol junk (2-5 character words) is such a pool; the default noise mix is not (its symbol junk is a
    # smaller share than the old pool's: on the session pool 6.12 characters per word in the sample, 6.07 in
    # the selection, and no fallback)
    from decision_pipeline.curation.documents import generate_pool
    planted = generate_pool(2000, 0.4, np.random.default_rng(123), noise_weights={"junk": 1.0})
    short = curate("curated", planted, dev, items, words, params(depth_count="estimated"), seed=3,
                   provenance={}).metrics
    assert short["chars_per_token"] < short["selected_chars_per_token"]
    assert short["fallback_docs"] > 0 and short["rule"]["depth_count"] == "estimated"
    assert short["fallback_docs"] == sum(v["reserve_used_docs"] for v in short["register_mix"].values())
    deep = curate("curated", planted, dev, items, words, params(depth_count="estimated", overfill=1.6), seed=3,
                  provenance={}).metrics
    assert deep["fallback_docs"] == 0 and deep["rule"]["overfill"] == 1.6


def test_same_inputs_same_selection(planted, dev, items, runs):
    a = runs["curated"]
    b = curate("curated", planted, dev, items, words, params(), seed=3, provenance={"source": "test"})
    assert a.selection.to_json() == b.selection.to_json() and a.metrics == b.metrics


def test_unknown_filter_fails_before_any_work(planted, dev, items):
    with pytest.raises(PipelineError, match="unknown filter 'langid'"):
        curate("curated", planted, dev, items, words, params(filters={"langid": {}}), seed=3, provenance={})


def test_bad_weights_fail_before_any_work(planted, dev, items):
    with pytest.raises(PipelineError, match=r"curate.weights: .* sum to 0.5"):
        curate("curated", planted, dev, items, words, params(mode="tokens", weights={"news": 0.5}), seed=3,
               provenance={})


MINHASH = MinhashParams(num_perm=64, bands=16, rows=4, ngram=5)


def test_ingest_pool_dev_and_heldout_are_disjoint_and_counted():
    p = IngestParams(n_docs=120, noise_fraction=0.25, noise_weights=dict(DEFAULT_NOISE_WEIGHTS), dev_per_register=3,
                     heldout_per_register=4, heldout_fraction=0.5,
                     dev_registers=["news", "qa", "reasoning"], register_weights={"news": 1.0, "reasoning": 1.0},
                     external_pool="", external_dev="", seed_offset=0, tune_fraction=0.0)
    pool, dev, heldout, tune, metrics = ingest(p, seed=5, minhash=MINHASH)
    assert tune == [] and metrics["tune_docs"] == 0
    assert len(pool) == metrics["pool_docs"] == 120 and len(dev) == metrics["dev_docs"] == 9
    assert metrics["dev_registers"] == {"news": 3, "qa": 3, "reasoning": 3}
    assert len(heldout) == metrics["heldout_docs"] == 12 - metrics["heldout"]["near_duplicates_dropped"]
    assert all(d["id"].startswith("heldout-") for d in heldout)
    texts = [{d["text"] for d in part} for part in (pool, dev, heldout)]
    assert not texts[0] & texts[1] and not texts[0] & texts[2] and not texts[1] & texts[2]
    assert sum(metrics["safety_scores"].values()) == 120
    kinds = metrics["pool_kinds"]  # the composition by generator kind (docs/curation.md, "The pool")
    assert sum(k["docs"] for k in kinds.values()) == 120
    assert sum(k["words"] for k in kinds.values()) == metrics["pool_words"]
    assert set(kinds) <= {"clean", *NOISE_KINDS} and {"news", "reasoning"} <= set(kinds["clean"]["registers"])
    assert sum(r["docs"] for r in kinds["clean"]["registers"].values()) == kinds["clean"]["docs"]
    assert all(set(json.loads(r["meta_json"])) >= {"meta_kind", "meta_register"} for r in pool)
    again, _, held_again, _, _ = ingest(p, seed=5, minhash=MINHASH)
    assert again == pool and held_again == heldout
    assert ingest(p, seed=6, minhash=MINHASH)[0] != pool
    assert np.isclose(metrics["pool_words"], sum(len(r["text"].split()) for r in pool))


def test_tune_set_is_a_stable_hash_share_of_the_held_out_documents():
    """Curation knobs are read on the tune part; the held-out part is left for the headline."""
    from decision_pipeline.common.hashing import stable_split
    base = dict(n_docs=120, noise_fraction=0.25, noise_weights=dict(DEFAULT_NOISE_WEIGHTS), dev_per_register=3,
                heldout_per_register=8, heldout_fraction=0.5,
                dev_registers=["news", "qa"], register_weights={"news": 1.0}, external_pool="", external_dev="",
                seed_offset=0)
    _, _, whole, none, _ = ingest(IngestParams(**base, tune_fraction=0.0), seed=5, minhash=MINHASH)
    _, _, heldout, tune, m = ingest(IngestParams(**base, tune_fraction=0.5), seed=5, minhash=MINHASH)
    assert none == [] and sorted(heldout + tune, key=lambda d: d["id"]) == sorted(whole, key=lambda d: d["id"])
    assert m["tune_docs"] == len(tune) > 0 and m["heldout_docs"] == len(heldout) > 0
    assert all(stable_split(d["id"], {"heldout": 0.5, "tune": 0.5}, salt="tune") == "tune" for d in tune)


def test_heldout_near_duplicates_of_target_or_pool_are_dropped():
    from decision_pipeline.curation.heldout import drop_near_duplicates, split_external
    words = " ".join(f"w{i}" for i in range(60))
    target = [{"id": "t0", "text": words, "register": "news"}]
    pool = [{"id": "p0", "text": "completely different text " * 12, "register": ""}]
    heldout = [{"id": "h0", "text": words + " extra", "register": "news"},           # near-dup of the target
               {"id": "h1", "text": "completely different text " * 12 + "x", "register": "qa"},  # of the pool
               {"id": "h2", "text": " ".join(f"v{i}" for i in range(60)), "register": "qa"}]
    kept, report = drop_near_duplicates(heldout, target, pool, MINHASH, seed=0)
    assert [d["id"] for d in kept] == ["h2"] and report["near_duplicates_dropped"] == 2
    docs = [{"id": f"d{i}", "text": str(i), "register": "qa"} for i in range(200)]
    tgt, held = split_external(docs, 0.5)
    assert len(tgt) + len(held) == 200 and 60 < len(held) < 140 and not {d["id"] for d in tgt} & {d["id"] for d in held}
    assert split_external(docs, 0.5) == (tgt, held)


def test_metrics_record_the_kept_checkpoint_and_the_artifact_shares(planted, runs):
    from decision_pipeline.curation.artifacts import count_artifacts
    clf = runs["curated"].metrics["classifier"]
    acc = clf["epoch_heldout_accuracy"]
    assert clf["checkpoint"] == "best_heldout" and clf["epochs"] == len(acc) == 2
    assert clf["chosen_epoch"] == acc.index(max(acc)) + 1 and clf["heldout_accuracy"] == max(acc)
    texts = {d["id"]: d["text"] for d in planted}
    for name, run in runs.items():
        art = run.metrics["artifacts"]
        trained = run.selection.ids[:run.selection.n_budget_docs]
        assert art["docs"] == len(trained) and art["register_by"] == "classifier_argmax"
        assert art["artifact_tokens"] == sum(count_artifacts(texts[i])[1].total() for i in trained)
        assert sum(v["docs"] for v in art["by_register"].values()) == len(trained)
        assert sum(v["docs"] for v in art["by_source_register"].values()) == len(trained)
    # the hygiene filters drop the junk and boilerplate pages that carry the artifacts; a random draw keeps them
    assert runs["curated"].metrics["artifacts"]["share"] < runs["random"].metrics["artifacts"]["share"]
    assert runs["random"].metrics["artifacts"]["by_source_register"]["noise"]["artifact_tokens"] > 0


def test_scores_file_in_row_groups_the_same_bytes_from_rows_or_groups(tmp_path, monkeypatch):
    """Both engines write scores.parquet through write_scores: rows (local) or row groups built as
    they are written (Ray); a pool past one row group is several groups, the same bytes either way."""
    monkeypatch.setattr(pipeline, "SCORES_ROW_GROUP", 4)
    rows = [{"id": f"d{i}", "drop_reason": "" if i % 3 else "near_duplicate", "scores_json": "{}"} for i in range(10)]
    pipeline.write_scores(tmp_path / "a.parquet", rows)
    groups = (pa.Table.from_pylist(rows[k:k + 4], schema=pipeline.SCORES_SCHEMA) for k in range(0, 10, 4))
    pipeline.write_scores(tmp_path / "b.parquet", groups)
    f = pq.ParquetFile(tmp_path / "a.parquet")
    assert f.metadata.num_row_groups == 3 and f.read().to_pylist() == rows
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    with pytest.raises(ValueError, match="a row group of 10 rows"):
        pipeline.write_scores(tmp_path / "c.parquet", iter([pa.Table.from_pylist(rows, schema=pipeline.SCORES_SCHEMA)]))
