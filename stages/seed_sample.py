"""Stage `seed_sample`: pool documents stratified over the six safety scores, with a
75/25 train/validation split by SHA-256 of the document id."""
from __future__ import annotations

import time

import pyarrow as pa

from decision_pipeline.charter.seed import SeedSampleParams, sample_seed, seed_counts
from decision_pipeline.common.io import read_table, write_json, write_table
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser

SEED_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("safety_score", pa.int64()),
                         ("split", pa.string())])


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (SeedSampleParams, "seed_sample"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pool", default="data/pool/pool.parquet")
    ap.add_argument("--out", default="data/charter/seed.parquet")
    ap.add_argument("--metrics", default="metrics/charter/seed_sample.json")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(SeedSampleParams, "seed_sample", args.params)
    rows = sample_seed(read_table(args.pool), cfg, load_base(args.params).seed)
    write_table(args.out, rows, SEED_SCHEMA)
    counts = seed_counts(rows)
    write_json(args.metrics, counts)
    summary("seed_sample", started, docs=counts["n"], validation=counts["validation"])


if __name__ == "__main__":
    raise SystemExit(main())
