"""Stage `ingest`: the document pool to curate and the held-out dev target.

Default profile: a seeded multi-register generator (news, encyclopedic, qa,
forum, plus `reasoning` — documents in the decision questions' own language —
and web-like noise). GPU profile: JSONL/Parquet shards by path. The dev
target is drawn from a separate stream and never shares a text with the pool.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.io import write_json, write_table
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.curation.documents import REGISTERS, generate_dev, generate_pool, load_external_pool, validate_pool
from decision_pipeline.decision.families import reasoning_text

POOL_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("safety_score", pa.int64()),
                         ("meta_json", pa.string())])
DEV_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("register", pa.string())])


@dataclass
class IngestParams:
    n_docs: int = rule(min=1)
    noise_fraction: float = rule(min=0.0, max=0.99)
    dev_per_register: int = rule(min=1)
    dev_registers: list[str] = rule(choices=REGISTERS + ("reasoning",))
    # share of clean pool documents per register: a web crawl is not shaped like the target
    register_weights: dict[str, float] = field(default_factory=dict)
    external_pool: str = ""   # JSONL/Parquet file or directory; replaces the generator
    external_dev: str = ""    # JSONL/Parquet with id, text, register


def _reasoning(g: np.random.Generator) -> str:
    return reasoning_text(random.Random(int(g.integers(2**62))))


def _pool_row(doc: dict) -> dict:
    meta = {k: v for k, v in doc.items() if k not in ("id", "text", "safety_score")}
    score = doc.get("safety_score", 0)
    return {"id": str(doc["id"]), "text": doc["text"], "safety_score": int(score if score is not None else 0),
            "meta_json": json.dumps(meta, sort_keys=True, default=str)}


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out-pool", default="data/pool/pool.parquet")
    ap.add_argument("--out-dev", default="data/pool/dev.parquet")
    ap.add_argument("--metrics", default="metrics/ingest.json")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(IngestParams, "ingest", args.params)
    seed = load_base(args.params).seed
    extra = {"reasoning": _reasoning}
    if p.external_pool:
        pool = load_external_pool(p.external_pool)
    else:
        pool = generate_pool(p.n_docs, p.noise_fraction, make_rng(seed, "pool"), extra_registers=extra,
                             register_weights=p.register_weights or None)
    pool = validate_pool(pool, p.external_pool or "pool")
    if p.external_dev:
        dev = [{"id": str(d["id"]), "text": d["text"], "register": str(d.get("register", ""))}
               for d in load_external_pool(p.external_dev)]
    else:
        dev = generate_dev(p.dev_per_register, p.dev_registers, make_rng(seed, "dev"), extra_registers=extra,
                           avoid_texts=[d["text"] for d in pool])
    counts = Counter(d["register"] for d in dev)
    empty = [r for r in p.dev_registers if counts.get(r, 0) == 0]
    if empty:
        raise PipelineError(f"ingest: dev register '{empty[0]}' has no documents; add some or drop it from ingest.dev_registers")
    overlap = {d["text"] for d in dev} & {d["text"] for d in pool}
    if overlap:
        raise PipelineError(f"ingest: {len(overlap)} dev texts also occur in the pool; the dev target must be held out")
    write_table(args.out_pool, [_pool_row(d) for d in pool], POOL_SCHEMA)
    write_table(args.out_dev, [{"id": d["id"], "text": d["text"], "register": d["register"]} for d in dev], DEV_SCHEMA)
    metrics = {"pool_docs": len(pool), "dev_docs": len(dev), "dev_registers": dict(sorted(counts.items())),
               "pool_words": int(sum(len(d["text"].split()) for d in pool)),
               "safety_scores": {str(k): v for k, v in sorted(Counter(int(d.get("safety_score") or 0) for d in pool).items())}}
    write_json(args.metrics, metrics)
    summary("ingest", started, pool_docs=len(pool), dev_docs=len(dev), pool_words=metrics["pool_words"])


if __name__ == "__main__":
    raise SystemExit(main())
