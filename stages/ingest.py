"""Stage `ingest`: the document pool to curate, the dev target and the held-out evaluation set.

Default profile: a seeded multi-register generator (news, encyclopedic, qa,
forum, plus `reasoning` — documents in the decision questions' own language —
and web-like noise). GPU profile: JSONL/Parquet shards by path. The dev target
(what the register classifier learns) and the held-out set (what pretraining
perplexity is measured on) are drawn from separate streams, never share a text
with the pool, and the held-out set keeps no near-duplicate (`curate.minhash`)
of a target or pool document.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import write_json, write_table
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import from_dict, load_base, load_section, read_params_file, stage_parser
from decision_pipeline.curation.documents import DEV_SCHEMA, POOL_SCHEMA, IngestParams, ingest
from decision_pipeline.curation.minhash import MinhashParams


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (IngestParams, "ingest"), (MinhashParams, "curate.minhash"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out-pool", required=True)
    ap.add_argument("--out-dev", required=True, help="dev target (the register classifier's)")
    ap.add_argument("--out-heldout", required=True, help="held-out evaluation set (pretrain perplexity, headline)")
    ap.add_argument("--out-tune", required=True, help="tune set (pretrain perplexity that curation knobs are chosen on)")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(IngestParams, "ingest", args.params)
    raw = read_params_file(args.params)
    if not isinstance(raw.get("curate"), dict) or "minhash" not in raw["curate"]:
        from decision_pipeline.common.errors import PipelineError
        raise PipelineError(f"{args.params}: curate.minhash is missing; the held-out set's near-duplicate test uses it")
    minhash = from_dict(MinhashParams, raw["curate"]["minhash"], f"{args.params}: curate.minhash")
    pool, dev, heldout, tune, metrics = ingest(p, load_base(args.params).seed + p.seed_offset, minhash)
    write_table(args.out_pool, pool, POOL_SCHEMA)
    write_table(args.out_dev, dev, DEV_SCHEMA)
    write_table(args.out_heldout, heldout, DEV_SCHEMA)
    write_table(args.out_tune, tune, DEV_SCHEMA)
    write_json(args.metrics, metrics)
    summary("ingest", started, pool_docs=metrics["pool_docs"], dev_docs=metrics["dev_docs"],
            heldout_docs=metrics["heldout_docs"], near_dups=metrics["heldout"]["near_duplicates_dropped"],
            pool_words=metrics["pool_words"], artifact_share_pool=metrics["artifacts"]["pool"]["share"],
            artifact_share_heldout=metrics["artifacts"]["heldout"]["share"])


if __name__ == "__main__":
    raise SystemExit(main())
