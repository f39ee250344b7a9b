"""Stage `reviews`: the review store (versioned SQLite) with every candidate's
reflections as annotations and the human review records (simulated in the default profile from
the reviewers' own latent-quality model of what each reference generator wrote, never from the
judge, or imported from the review UI's export), validated on import; writes the store, its JSONL
export, and the reviewers' disagreement with each other."""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.charter.annotate import ReflectParams, build_reviews
from decision_pipeline.charter.reviews import ReviewsParams
from decision_pipeline.common.io import atomic_dir, read_jsonl, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (ReviewsParams, "reviews"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--reflect-dir", default="data/charter/reflect")
    ap.add_argument("--out", default="data/reviews")
    ap.add_argument("--metrics", default="metrics/charter/reviews.json")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(ReviewsParams, "reviews", args.params)
    names = list(load_section(ReflectParams, "reflect", args.params).candidates)
    reflections = [r for n in names for r in read_jsonl(Path(args.reflect_dir) / f"{n}.jsonl")]
    with atomic_dir(args.out) as tmp:
        counts = build_reviews(reflections, [], cfg, load_base(args.params).seed, tmp)
    write_json(args.metrics, counts)
    d = counts["reviewer_disagreement"]
    summary("reviews", started, reviews=counts["reviews"], comments=counts["comments"],
            reflections=counts["reflections_reviewed"], reviewer_disagreement=d["rate"],
            expected=d.get("expected_rate"), pairs=d["pairs"])


if __name__ == "__main__":
    raise SystemExit(main())
