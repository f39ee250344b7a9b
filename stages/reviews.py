"""Stage `reviews`: the review store (versioned SQLite) with every candidate's
reflections as annotations and the human review records (simulated from the reference generators'
known faults in the default profile, never from the judge, or imported from the review UI's export), validated
on import; writes the store and its JSONL export."""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.charter.annotate import ReflectParams, build_reviews
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.reviews import ReviewsParams
from decision_pipeline.common.io import atomic_dir, read_jsonl, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (ReviewsParams, "reviews"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--reflect-dir", default="data/charter/reflect")
    ap.add_argument("--judge-dir", default="data/charter/judge")
    ap.add_argument("--out", default="data/reviews")
    ap.add_argument("--metrics", default="metrics/charter/reviews.json")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(ReviewsParams, "reviews", args.params)
    cands = load_section(ReflectParams, "reflect", args.params).candidates
    names = list(cands)
    references = {n: c.reference for n, c in cands.items() if c.kind == "reference"}
    harm = load_section(JudgeParams, "judge", args.params).checks.harm_threshold
    reflections = [r for n in names for r in read_jsonl(Path(args.reflect_dir) / f"{n}.jsonl")]
    judged = [r for n in names for r in read_jsonl(Path(args.judge_dir) / f"{n}.jsonl")]
    with atomic_dir(args.out) as tmp:
        counts = build_reviews(reflections, judged, cfg, load_base(args.params).seed, tmp, references, harm)
    write_json(args.metrics, counts)
    summary("reviews", started, **counts)


if __name__ == "__main__":
    raise SystemExit(main())
