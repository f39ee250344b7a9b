"""Stage `curate@{curated,random}`: select pool documents into the token budget.

Both start from the pool minus documents that contain a held-out question, so
neither base model has seen an evaluation question with its answer.
curated: hygiene filters → MinHash near-duplicate removal → register
classifier scores (written, inspectable) → selection by `mode` / `overfill`
with a reserve tail. random: a seeded uniform draw from the (decontaminated)
pool at the same budget — the baseline curation must beat. The work is
`decision_pipeline.curation.pipeline.curate_files`, or with `curate.engine: ray`
`decision_pipeline.curation.ray_engine.curate_on_ray`.
"""
from __future__ import annotations

import json
import time

from decision_pipeline.common.io import atomic_dir, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.common.raycluster import choose
from decision_pipeline.curation.classifier import save_model
from decision_pipeline.curation.pipeline import SELECTIONS, CurateParams, curate_files, write_scores
from decision_pipeline.curation.ray_engine import curate_on_ray


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (CurateParams, "curate"))
    ap.add_argument("name", choices=SELECTIONS)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pool", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--items", required=True, help="held-out splits are decontaminated")
    ap.add_argument("--out", required=True, help="directory: selection, scores, classifier, provenance")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(CurateParams, "curate", args.params)
    seed = load_base(args.params).seed + p.seed_offset
    provenance = {"source": args.pool, "tokenizer": args.tokenizer}
    # engine ray: the pool streamed as Parquet shards over a Ray cluster, the same outputs
    run = choose(p, curate_files, curate_on_ray)
    result = run(args.name, args.pool, args.dev, args.items, args.tokenizer, p, seed, provenance)
    with atomic_dir(args.out) as tmp:
        (tmp / "selection.json").write_text(result.selection.to_json())
        write_scores(tmp / "scores.parquet", result.scores_rows)
        save_model(result.classifier, tmp / "classifier.npz")
        (tmp / "provenance.json").write_text(json.dumps(result.provenance, indent=2, sort_keys=True))
    write_json(args.metrics, result.metrics)
    m = result.metrics
    summary(f"curate@{args.name}", started, pool=m["pool_docs"], contaminated=m["decontamination"]["removed_docs"],
            filtered=m["after_filters"], dedup_removed=m["dedup"]["removed"], selected=m["selected_docs"],
            clf_acc=m["classifier"]["heldout_accuracy"], clf_epoch=m["classifier"]["chosen_epoch"],
            artifact_share=m["artifacts"]["share"])


if __name__ == "__main__":
    raise SystemExit(main())
