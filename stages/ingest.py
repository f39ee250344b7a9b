"""Stage `ingest`: the document pool to curate and the held-out dev target.

Default profile: a seeded multi-register generator (news, encyclopedic, qa,
forum, plus `reasoning` — documents in the decision questions' own language —
and web-like noise). GPU profile: JSONL/Parquet shards by path. The dev
target is drawn from a separate stream and never shares a text with the pool.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import write_json, write_table
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.curation.documents import DEV_SCHEMA, POOL_SCHEMA, IngestParams, ingest


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (IngestParams, "ingest"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out-pool", required=True)
    ap.add_argument("--out-dev", required=True)
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(IngestParams, "ingest", args.params)
    pool, dev, metrics = ingest(p, load_base(args.params).seed)
    write_table(args.out_pool, pool, POOL_SCHEMA)
    write_table(args.out_dev, dev, DEV_SCHEMA)
    write_json(args.metrics, metrics)
    summary("ingest", started, pool_docs=metrics["pool_docs"], dev_docs=metrics["dev_docs"],
            pool_words=metrics["pool_words"])


if __name__ == "__main__":
    raise SystemExit(main())
