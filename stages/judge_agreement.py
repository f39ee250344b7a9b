"""Stage `judge_agreement`: Cohen's kappa of the judge vs the human reference verdicts
(thread overrides review) on the validation split, with a bootstrap CI and the spread
over judge repeats; records them in the store's judge_correlations table."""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.charter.annotate import AgreementParams, ReflectParams, agreement
from decision_pipeline.charter.figures import judge_calibration
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.reviews import PROVENANCE, ReviewsParams
from decision_pipeline.common.io import atomic_dir, read_jsonl, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


def provenance(cfg: ReviewsParams) -> str:
    """Where the review reference came from (recorded next to kappa)."""
    return PROVENANCE if cfg.source == "seeded" else f"imported human reviews: {cfg.import_path}"


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (AgreementParams, "judge_agreement"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--reflect-dir", default="data/charter/reflect")
    ap.add_argument("--judge-dir", default="data/charter/judge")
    ap.add_argument("--export", default="data/reviews/export.jsonl")
    ap.add_argument("--out", default="data/charter/agreement")
    ap.add_argument("--metrics", default="metrics/charter/judge_agreement.json")
    ap.add_argument("--plot", default="plots/charter/judge_calibration.png")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(AgreementParams, "judge_agreement", args.params)
    judge_cfg = load_section(JudgeParams, "judge", args.params)
    names = list(load_section(ReflectParams, "reflect", args.params).candidates)
    reflections = [r for n in names for r in read_jsonl(Path(args.reflect_dir) / f"{n}.jsonl")]
    judged = [r for n in names for r in read_jsonl(Path(args.judge_dir) / f"{n}.jsonl")]
    with atomic_dir(args.out) as tmp:
        metrics, confusion = agreement(reflections, judged, Path(args.export), cfg, judge_cfg,
                                       load_base(args.params).seed, tmp / "store.sqlite",
                                       provenance(load_section(ReviewsParams, "reviews", args.params)))
    judge_calibration(confusion, metrics, args.plot)
    write_json(args.metrics, {**metrics, "confusion": confusion})
    summary("judge_agreement", started, kappa=metrics["kappa"], ci_low=metrics["ci_low"],
            ci_high=metrics["ci_high"], spread=metrics["kappa_spread"], n=metrics["n"])


if __name__ == "__main__":
    raise SystemExit(main())
