"""Our curation filters and MinHash against datatrove's, on the default run's pool (issue 23, item 7).

    pip install "datatrove==0.10.*" spacy regex nltk tokenizers "xxhash<4"   # not in the lock (xxhash 4 refuses str)
    python perf/compare_datatrove.py [--docs 4000]

Measured on the same texts (data/pool/pool.parquet, built by `dvc repro pipelines/curation/dvc.yaml:ingest`), in one process:

* repetition filters, like for like: our `repeated_lines(0.3)` + `repeated_ngrams(5, 0.15)` against
  `GopherRepetitionFilter` restricted to the same two checks (duplicate line fraction 0.3, duplicate
  5-gram character fraction 0.15; every other check off), then datatrove's full Gopher default set;
  docs/s and which documents each drops (agreement);
* MinHash signatures, like for like in size: our `minhash_signatures` at 112 permutations over word
  5-grams against `MinhashDedupSignature` (14 buckets x 8 hashes, 5-grams), which also writes its
  bucket files to a temporary folder (part of what it does).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from decision_pipeline.curation.filters import repeated_lines, repeated_ngrams
from decision_pipeline.curation.minhash import minhash_signatures

ROOT = Path(__file__).resolve().parents[1]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=4000)
    args = ap.parse_args()
    from datatrove.data import Document
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.pipeline.filters import GopherRepetitionFilter

    texts = pq.read_table(ROOT / "data/pool/pool.parquet", columns=["text"]).column("text").to_pylist()[:args.docs]
    n = len(texts)
    lines, ngrams = repeated_lines(0.3), repeated_ngrams(5, 0.15)
    ours, t_ours = timed(lambda: [not (lines(t)[0] and ngrams(t)[0]) for t in texts])
    same = GopherRepetitionFilter(dup_line_frac=0.3, dup_para_frac=None, dup_line_char_frac=None,
                                  dup_para_char_frac=None, top_n_grams=(), dup_n_grams=((5, 0.15),))
    full = GopherRepetitionFilter()

    def drops(f):
        return [f.filter(Document(text=t, id=str(i))) is not True for i, t in enumerate(texts)]

    theirs, t_same = timed(lambda: drops(same))
    theirs_full, t_full = timed(lambda: drops(full))
    both = sum(a and b for a, b in zip(ours, theirs))
    print(f"{n} documents, repetition filters (docs/s; dropped):")
    print(f"  ours (lines 0.3 + 5-gram chars 0.15)      {n / t_ours:9.0f} docs/s  dropped {sum(ours)}")
    print(f"  datatrove, the same two checks           {n / t_same:9.0f} docs/s  dropped {sum(theirs)}"
          f"  (both {both}, ours only {sum(ours) - both}, datatrove only {sum(theirs) - both})")
    print(f"  datatrove, full Gopher repetition set    {n / t_full:9.0f} docs/s  dropped {sum(theirs_full)}")
    print(f"  speed ours / datatrove (same checks): {t_same / t_ours:.2f}x")

    _, t_sig = timed(lambda: minhash_signatures(texts, 112, 5, seed=1))
    with tempfile.TemporaryDirectory() as tmp:
        step = MinhashDedupSignature(output_folder=tmp, config=MinhashConfig(n_grams=5, num_buckets=14,
                                                                             hashes_per_bucket=8))
        docs = (Document(text=t, id=str(i)) for i, t in enumerate(texts))
        _, t_dt = timed(lambda: step.run(docs, rank=0, world_size=1))
    print(f"MinHash signatures, 112 hashes over word 5-grams: ours {n / t_sig:.0f} docs/s, "
          f"datatrove {n / t_dt:.0f} docs/s (writes bucket files): ours / datatrove {t_dt / t_sig:.2f}x")


if __name__ == "__main__":
    main()
