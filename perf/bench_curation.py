"""Throughput of the curation library on 3,000 synthetic 100-600-word documents.

Documents come from the pool generator (clean registers, re-cut to a uniform 100-600
word length). The knobs are the curate stage's: ``curate.minhash`` / ``curate.classifier``
/ selection settings from params.yaml and ``base.seed`` (``--params`` to use another
file). Timed on the same texts in ``--repeats`` interleaved rounds (each round calls
every timed function once, in turn); reported: median docs/s (best in brackets), and
ratios = median over rounds of the two times within one round (robust to a shared
machine's load drifting between rounds):

  * features:  ``classifier.featurize`` (hashed unigrams + bigrams, sqrt tf, L2);
  * scoring:   ``classifier.score_docs`` (featurize + softmax) with a trained model;
  * minhash:   ``minhash.minhash_signatures`` from raw text (tokenising, shingle hashing
               and signatures), 1 thread and the default thread count; plus full ``dedup``;
  * shingle hashing alone: ``minhash.shingle_hashes`` (part of the minhash time);
  * selection: ``selection.select`` over the scored documents;
  * datasketch ``MinHash.update_batch``, one sketch per doc, legacy scheme (``(a*x + b)
    mod (2**61 - 1)``, the arithmetic ours reproduces) with our ``(a, b)``:
      - same hash: fed our own 32-bit shingle values (``shingle_hashes``, computed once
        outside the timer, ``hashfunc=int``), so both sides compute the same thing and
        the signatures are bit-identical (asserted for every doc). This is the
        like-for-like ratio; datasketch is not charged for tokenising or hashing, so it
        is conservative for us;
      - SHA-1: datasketch's default ``hashfunc`` (``sha1_hash32``) over the same 5-word
        shingles as bytes (built outside the timer): what a datasketch user gets by
        default; different shingle values, so different (equally valid) signatures.
    Also shown: datasketch 2.x's fully default ``MinHash(num_perm)`` (SHA-1, then its
    "affine32" permutations: a mixing step plus ``a*x + b mod 2**32``, a different family).

Also checks estimate quality: on 300 (doc, lightly edited copy) pairs, mean absolute
error of the signature-agreement Jaccard estimate vs the true shingle Jaccard.
Run: ``.venv/bin/python perf/bench_curation.py [--repeats 5] [--json out.json]``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decision_pipeline.common.params import BaseParams, load_section  # noqa: E402
from decision_pipeline.curation.classifier import featurize, score_docs, train_classifier  # noqa: E402
from decision_pipeline.curation.documents import REGISTERS, generate_dev, generate_pool  # noqa: E402
from decision_pipeline.curation.minhash import dedup, minhash_signatures, permutations, shingle_hashes  # noqa: E402
from decision_pipeline.curation.pipeline import CurateParams  # noqa: E402
from decision_pipeline.curation.selection import estimate_token_counts, select  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def make_docs(n: int, seed: int) -> list[str]:
    """n texts of U[100, 600] words, each cut from concatenated same-register pool docs."""
    rng = np.random.default_rng(seed)
    pool = generate_pool(n, 0.0, rng)
    by_reg: dict[str, list[str]] = {}
    for d in pool:
        by_reg.setdefault(d["meta_register"], []).extend(d["text"].split())
    texts, cursor = [], dict.fromkeys(by_reg, 0)
    for d in pool:
        reg, length = d["meta_register"], int(rng.integers(100, 601))
        words = by_reg[reg]
        start = cursor[reg] % max(len(words) - length, 1)
        cursor[reg] = start + length
        texts.append(" ".join(words[start:start + length]))
    return texts


def interleaved(funcs: dict, repeats: int) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Wall seconds of every function in each of ``repeats`` rounds (all functions per round), last results."""
    times: dict[str, list[float]] = {k: [] for k in funcs}
    results: dict[str, object] = {}
    for _ in range(repeats):
        for name, fn in funcs.items():
            t0 = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - t0)
    return times, results


def shingles(text: str, ngram: int) -> list[bytes]:
    """The 5-word shingles ``shingle_hashes`` hashes (lower-cased whitespace words), as bytes for SHA-1."""
    w = text.lower().split()
    return [" ".join(w[i:i + ngram]).encode() for i in range(len(w) - ngram + 1)] or [" ".join(w).encode()]


def our_shingle_values(texts: list[str], ngram: int) -> list[list[int]]:
    """Per doc, our 32-bit shingle values as Python ints: what datasketch is fed for "same hash"."""
    x, off = shingle_hashes(texts, ngram)
    return [x[off[i]:off[i + 1]].tolist() for i in range(len(texts))]


def datasketch_signatures(datasketch, inputs: list[list], num_perm: int, **kwargs) -> np.ndarray:
    """One ``MinHash(num_perm, **kwargs)`` per doc, ``update_batch(doc's inputs)``; hash values stacked."""
    sketches = []
    for values in inputs:
        m = datasketch.MinHash(num_perm=num_perm, **kwargs)
        m.update_batch(values)
        sketches.append(m)
    return np.stack([m.hashvalues for m in sketches])


def jaccard_error(texts: list[str], rng: np.random.Generator, num_perm: int, ngram: int, seed: int,
                  datasketch=None) -> dict:
    """MAE of estimated vs true shingle Jaccard on (doc, edited copy) pairs."""
    pairs = []
    for t in texts[:300]:
        w = t.split()
        for i in rng.choice(len(w), size=int(rng.integers(1, 25)), replace=False):
            w[i] = "edited"
        pairs.append((t, " ".join(w)))
    true = []
    for a, b in pairs:
        sa, sb = set(shingles(a, ngram)), set(shingles(b, ngram))
        true.append(len(sa & sb) / len(sa | sb))
    flat = [t for p in pairs for t in p]
    sig = minhash_signatures(flat, num_perm, ngram, seed)
    ours = (sig[0::2] == sig[1::2]).mean(axis=1)
    out = {"pairs": len(pairs), "mean_true_jaccard": float(np.mean(true)),
           "ours_mae": float(np.abs(ours - true).mean())}
    if datasketch is not None:
        ds = datasketch_signatures(datasketch, [shingles(t, ngram) for t in flat], num_perm,
                                   scheme="legacy", permutations=permutations(num_perm, seed))
        out["datasketch_sha1_mae"] = float(np.abs((ds[0::2] == ds[1::2]).mean(axis=1) - true).mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-docs", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml", help="params file (curate, base.seed)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    p = load_section(CurateParams, "curate", args.params)
    seed = load_section(BaseParams, "base", args.params).seed
    num_perm, ngram = p.minhash.num_perm, p.minhash.ngram
    n = args.n_docs
    texts = make_docs(n, seed=0)
    words = [len(t.split()) for t in texts]
    print(f"{n} docs, {min(words)}-{max(words)} words (mean {np.mean(words):.0f}); num_perm {num_perm}, "
          f"ngram {ngram}, seed {seed}; {args.repeats} interleaved rounds, median docs/s [best]")

    res: dict = {"n_docs": n, "mean_words": float(np.mean(words)), "num_perm": num_perm, "ngram": ngram,
                 "seed": seed, "repeats": args.repeats, "statistic": "median over interleaved rounds"}
    docs = [{"id": f"b-{i:05d}", "text": t} for i, t in enumerate(texts)]
    dev = generate_dev(100, REGISTERS, np.random.default_rng(1))
    t0 = time.perf_counter()
    model = train_classifier(dev, docs, list(REGISTERS), p.classifier, seed=seed)
    res["train_s"] = time.perf_counter() - t0
    scores = score_docs(model, docs)
    tokens = estimate_token_counts(texts, 4.0)
    budget = int(tokens.sum()) // 3
    funcs = {  # the MinHash runs and their datasketch baselines are adjacent within a round
        "minhash_1t": lambda: minhash_signatures(texts, num_perm, ngram, seed, n_threads=1),
        "minhash_default_threads": lambda: minhash_signatures(texts, num_perm, ngram, seed),
    }
    others = {
        "shingle_hashes": lambda: shingle_hashes(texts, ngram),
        "dedup": lambda: dedup(docs, p.minhash, seed),
        "features": lambda: featurize(texts, p.classifier.n_buckets),
        "scoring": lambda: score_docs(model, docs),
        "selection": lambda: select(docs, scores, tokens, budget, list(REGISTERS), p.mode, p.overfill, p.reserve),
    }
    try:
        import datasketch
    except ImportError:
        datasketch = None
        print("datasketch is not importable: skipping the MinHash comparison (pip install datasketch)")
    if datasketch is not None:
        a, b = permutations(num_perm, seed)
        same_hash = our_shingle_values(texts, ngram)     # outside the timer
        sha1_input = [shingles(t, ngram) for t in texts]  # outside the timer
        funcs["datasketch_same_hash"] = lambda: datasketch_signatures(
            datasketch, same_hash, num_perm, scheme="legacy", permutations=(a, b), hashfunc=int)
        funcs["datasketch_sha1"] = lambda: datasketch_signatures(
            datasketch, sha1_input, num_perm, scheme="legacy", permutations=(a, b))
        funcs["datasketch_affine32_default"] = lambda: datasketch_signatures(datasketch, sha1_input, num_perm)
        res["datasketch_version"] = datasketch.__version__
    times, results = interleaved(funcs | others, args.repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        res[f"{k}_docs_s"] = n / med[k]
        res[f"{k}_best_docs_s"] = n / min(v)
    ours = results["minhash_1t"]
    assert np.array_equal(ours, results["minhash_default_threads"]), "signatures depend on the thread count"
    if datasketch is not None:
        ds = results["datasketch_same_hash"]
        assert ds.shape == ours.shape and np.array_equal(ds, ours), \
            "datasketch fed our shingle values does not give our signatures bit for bit"
        res["same_hash_signatures_bit_identical"] = True
        for k in ("datasketch_same_hash", "datasketch_sha1", "datasketch_affine32_default"):
            short = k.removeprefix("datasketch_")
            for ours_k, suffix in (("minhash_1t", "1t"), ("minhash_default_threads", "default_threads")):
                # per round (the two ran seconds apart, under the same load), then the median over rounds
                res[f"ratio_vs_{short}_{suffix}"] = statistics.median(
                    theirs / mine for theirs, mine in zip(times[k], times[ours_k]))
    res["jaccard_estimate"] = jaccard_error(texts, np.random.default_rng(2), num_perm, ngram, seed, datasketch)

    for k, v in res.items():
        if k.endswith("_best_docs_s"):
            continue
        best = res.get(k.replace("_docs_s", "_best_docs_s")) if k.endswith("_docs_s") else None
        text = f"{v:,.2f}" if isinstance(v, float) else str(v)
        print(f"  {k:42s} {text}" + (f" [{best:,.0f}]" if best else ""))
    if datasketch is not None:
        print(f"minhash (1 thread, from raw text) vs datasketch {datasketch.__version__} update_batch, same "
              f"{num_perm} permutations, median of per-round ratios:")
        print(f"  same hash (fed our shingle values; bit-identical signatures): {res['ratio_vs_same_hash_1t']:.2f}x"
              "  <- like-for-like")
        print(f"  default SHA-1 shingle hashing (different signatures):       {res['ratio_vs_sha1_1t']:.2f}x")
        print(f"  datasketch fully default (SHA-1 + affine32 permutations):   "
              f"{res['ratio_vs_affine32_default_1t']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
