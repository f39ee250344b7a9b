"""Stage `judge_prompt`: the judge-prompt loop. One edit of the judge's prompt per revision,
scored by Cohen's kappa against the TRAIN split's reviews only; the best prompt is frozen
(final.md, what judge@ uses) and the held-out validation split is read once (a second read
for another prompt is refused by the ledger)."""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.charter.annotate import AgreementParams, ReflectParams
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.judge_prompt import JudgePromptParams, run
from decision_pipeline.common.io import atomic_dir, read_jsonl, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (JudgePromptParams, "judge_prompt"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--reflect-dir", default="data/charter/reflect")
    ap.add_argument("--export", default="data/reviews/export.jsonl")
    ap.add_argument("--out-dir", default="data/charter/judge_prompt")
    ap.add_argument("--metrics", default="metrics/charter/judge_prompt.json")
    ap.add_argument("--reads", default="metrics/charter/judge_prompt_reads.json",
                    help="the ledger of validation reads (persisted across runs)")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(JudgePromptParams, "judge_prompt", args.params)
    judge_cfg = load_section(JudgeParams, "judge", args.params)
    reflect_cfg = load_section(ReflectParams, "reflect", args.params)
    agree = load_section(AgreementParams, "judge_agreement", args.params)
    reflections = [r for n in reflect_cfg.candidates for r in read_jsonl(Path(args.reflect_dir) / f"{n}.jsonl")]
    with atomic_dir(args.out_dir) as tmp:
        metrics, ledger, reused = run(cfg, judge_cfg, reflect_cfg.charter, reflections, Path(args.export),
                              agree.n_resamples, agree.confidence, load_base(args.params).seed, tmp, Path(args.reads))
    write_json(args.reads, ledger)
    write_json(args.metrics, metrics)
    summary("judge_prompt", started, revisions=metrics["revisions"], train_kappa_start=metrics["train"]["kappa_start"],
            train_kappa_final=metrics["train"]["kappa_final"], validation_kappa=metrics["validation"]["kappa"],
            reused_read=reused)


if __name__ == "__main__":
    raise SystemExit(main())
