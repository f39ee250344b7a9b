"""MinHash/LSH dedup: near-duplicates found, distinct docs kept, exact and deterministic."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.curation.minhash import (MERSENNE, MinhashParams, check_lsh_params, cluster, dedup, lsh_groups, minhash_signatures,
                                     permutations, shingle_hashes)

from .conftest import MINHASH


def test_near_duplicates_removed_and_distinct_kept(filtered, deduped):
    kinds = {d["id"]: d for d in filtered}
    removed = Counter(kinds[i]["meta_kind"] for i in deduped.removed_ids)
    n_near = sum(d["meta_kind"] == "near_dup" for d in filtered)
    # measured: every near-dup removed, no clean doc removed
    assert removed["near_dup"] >= 0.95 * n_near
    assert removed["clean"] <= 0.005 * sum(d["meta_kind"] == "clean" for d in filtered)
    assert deduped.n_removed == len(deduped.removed_ids) == len(filtered) - len(deduped.kept)
    assert deduped.dedup_rate == pytest.approx(deduped.n_removed / len(filtered))
    assert 0.05 < deduped.dedup_rate < 0.2
    for kept_id, dups in deduped.clusters.items():  # the original (earlier in the pool) is the one kept
        for dup in dups:
            assert kinds[dup].get("meta_dup_of", kept_id) == kept_id and kept_id < dup


def test_keeps_first_in_pool_order():
    base = " ".join(f"word{i}" for i in range(80))
    docs = [{"id": "z-late", "text": "unrelated text " * 3 + "other " * 40},
            {"id": "b", "text": base + " tail"}, {"id": "a", "text": base + " end"}]
    res = dedup(docs, MINHASH, seed=1)
    assert [d["id"] for d in res.kept] == ["z-late", "b"] and res.removed_ids == ["a"]
    assert res.clusters == {"b": ["a"]}


def test_short_docs_are_one_shingle():
    docs = [{"id": "1", "text": "Page not found."}, {"id": "2", "text": "page   NOT found."},
            {"id": "3", "text": "Coming soon."}, {"id": "4", "text": ""}, {"id": "5", "text": "  "}]
    res = dedup(docs, MINHASH, seed=1)
    assert res.removed_ids == ["2", "5"]  # whitespace/case-normalised whole text is the shingle
    x, off = shingle_hashes(["a b c", "a b c d e f"], ngram=5)
    assert off.tolist() == [0, 1, 3]


def test_signatures_follow_mersenne_formula_and_thread_invariant(pool):
    texts = [d["text"] for d in pool[:120]]
    x, off = shingle_hashes(texts, 5)
    assert (x < 2**32).all() and off[-1] == len(x)
    a, b = permutations(64, seed=1)
    sig1 = minhash_signatures(texts, 64, 5, 1, n_threads=1)
    assert sig1.dtype == np.uint32 and sig1.shape == (120, 64)
    assert np.array_equal(sig1, minhash_signatures(texts, 64, 5, 1, n_threads=3))
    p, m64 = int(MERSENNE), (1 << 64) - 1
    for d in range(0, 120, 17):
        for j in range(0, 64, 9):  # datasketch legacy: uint64 wrap, mod p, low 32 bits
            want = min((((int(a[j]) * int(v) + int(b[j])) & m64) % p) & 0xFFFFFFFF for v in x[off[d]:off[d + 1]])
            assert int(sig1[d, j]) == want


@pytest.mark.parametrize("seed", [1, 1234])  # 1234: params.yaml base.seed, what the curate stage and the benchmark use
def test_bit_identical_to_datasketch_legacy(pool, seed):
    """datasketch fed our shingle values gives our signatures bit for bit: the like-for-like
    comparison of perf/bench_curation.py (it feeds ``hashfunc=int`` the per-doc value lists)."""
    datasketch = pytest.importorskip("datasketch")
    texts = [d["text"] for d in pool[:40]] + ["", "two words", "Page   NOT found."]
    x, off = shingle_hashes(texts, 5)
    a, b = permutations(64, seed)
    sig = minhash_signatures(texts, 64, 5, seed)
    for d in range(len(texts)):
        values = x[off[d]:off[d + 1]].tolist()
        m = datasketch.MinHash(num_perm=64, scheme="legacy", permutations=(a, b), hashfunc=int)
        m.update_batch(values)  # the benchmark's way: precomputed integer hashes
        assert np.array_equal(m.hashvalues, sig[d])
        vals = iter(values)  # the same through an injected per-shingle hash function, one update at a time
        m = datasketch.MinHash(num_perm=64, scheme="legacy", permutations=(a, b), hashfunc=lambda _: next(vals))
        for shingle in range(len(values)):
            m.update(shingle)
        assert np.array_equal(m.hashvalues, sig[d])
    # the comparison is sensitive: datasketch's default SHA-1 shingle hashing, or other permutations, differ
    words = texts[0].lower().split()
    sha1 = datasketch.MinHash(num_perm=64, scheme="legacy", permutations=(a, b))
    sha1.update_batch([" ".join(words[i:i + 5]).encode() for i in range(len(words) - 4)])
    other = datasketch.MinHash(num_perm=64, scheme="legacy", permutations=permutations(64, seed + 1), hashfunc=int)
    other.update_batch(x[off[0]:off[1]].tolist())
    assert (sha1.hashvalues != sig[0]).mean() > 0.9 and (other.hashvalues != sig[0]).mean() > 0.9


def test_signature_agreement_estimates_jaccard():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in rng.integers(0, 5000, size=400)]
    other = list(words)
    for i in range(0, 400, 25):  # 16 edits -> shingle Jaccard ~0.67
        other[i] = "edit"
    sh = [{" ".join(w[i:i + 5]) for i in range(len(w) - 4)} for w in (words, other)]
    true_j = len(sh[0] & sh[1]) / len(sh[0] | sh[1])
    sig = minhash_signatures([" ".join(words), " ".join(other)], 256, 5, 1)
    assert abs((sig[0] == sig[1]).mean() - true_j) < 0.1


def test_hashes_stable_across_processes():
    code = ("from decision_pipeline.curation.minhash import minhash_signatures as m;"
            "print(int(m(['the quick brown fox jumps over the lazy dog'], 64, 5, 1)[0].sum()))")
    root = Path(__file__).resolve().parents[2]
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": s}, cwd=root).stdout for s in ("1", "2")}
    assert len(outs) == 1


def test_lsh_and_cluster_steps():
    sig = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [7, 7, 3, 4], [5, 5, 5, 5]], dtype=np.uint64)
    groups = lsh_groups(sig, bands=2, rows=2)
    assert sorted(g.tolist() for g in groups) == [[0, 1], [0, 2]]
    assert cluster(4, groups).tolist() == [0, 0, 0, 3]


@pytest.mark.parametrize("args, msg", [((64, 16, 5), "16\\*5 = 80 != num_perm = 64"), ((0, 1, 0), "num_perm"),
                                       ((64, 16.0, 4), "bands")])
def test_bad_lsh_params(args, msg):
    with pytest.raises(PipelineError, match=msg):
        check_lsh_params(*args)
    with pytest.raises(PipelineError, match=msg):
        dedup([{"id": "a", "text": "x"}], MinhashParams(*args, ngram=5), seed=1)
    with pytest.raises(PipelineError, match="minhash.ngram"):
        dedup([{"id": "a", "text": "x"}], dataclasses.replace(MINHASH, ngram=0), seed=1)


def test_deterministic(filtered):
    a, b = dedup(filtered[:400], MINHASH, seed=1), dedup(filtered[:400], MINHASH, seed=1)
    assert a.removed_ids == b.removed_ids and a.clusters == b.clusters


def test_dedup_keeps_best_scored_twin_and_drops_exact_copies_first():
    from decision_pipeline.curation.minhash import MinhashParams
    p = MinhashParams(num_perm=64, bands=16, rows=4, ngram=5)
    base = " ".join(f"w{i}" for i in range(80))
    docs = [{"id": "x", "text": base}, {"id": "y", "text": base + " extra"},
            {"id": "z", "text": base.replace(" ", "  \n")},   # x with other whitespace: an exact copy
            {"id": "u", "text": " ".join(f"v{i}" for i in range(80))}]
    plain = dedup(docs, p, seed=0)                            # pool order: the first twin survives
    assert [d["id"] for d in plain.kept] == ["x", "u"] and plain.exact_ids == ()
    best = dedup(docs, p, seed=0, priority=[0.2, 0.9, 0.5, 0.1], exact=True)
    assert [d["id"] for d in best.kept] == ["y", "u"]        # y scores best; kept in pool order
    assert best.exact_ids == ("x",) and best.clusters == {"y": ["x", "z"]}
    # z (0.5) outranks x (0.2): x is the exact copy removed; z then loses to y as a near-duplicate
    assert sorted(best.removed_ids) == ["x", "z"]
