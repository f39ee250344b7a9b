"""Stage `improve@{candidate}`: the per-generator improver loop. Reflections on a fresh
stratified sample (disjoint from the reviewed seed documents), the frozen judge, one
prompt edit per revision by the improver; every revision's prompt file and accept rate
recorded; the final prompt is what `reflect@{candidate}` uses."""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.charter.annotate import (ReflectParams, check_judge_not_candidate, screen,
                                                 screened_out_metrics)
from decision_pipeline.charter.improve_run import ImproveParams, improve_sample, run
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.seed import SeedSampleParams
from decision_pipeline.common.io import atomic_dir, read_table, write_json, write_text_atomic
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (ImproveParams, "improve"))
    ap.add_argument("candidate")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pool", default="data/pool/pool.parquet")
    ap.add_argument("--seed-table", default="data/charter/seed.parquet", help="the reviewed documents (excluded)")
    ap.add_argument("--out-dir", default="data/charter/improve")
    ap.add_argument("--metrics-dir", default="metrics/charter/improve")
    ap.add_argument("--throughput-metrics", default="metrics/charter/throughput",
                    help="throughput@candidate records: a screened-out candidate is not improved")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(ImproveParams, "improve", args.params)
    reflect_cfg = load_section(ReflectParams, "reflect", args.params)
    judge_cfg = load_section(JudgeParams, "judge", args.params)
    check_judge_not_candidate(judge_cfg, reflect_cfg.candidates)
    seed = load_base(args.params).seed
    gate = screen(args.candidate, Path(args.throughput_metrics))
    with atomic_dir(Path(args.out_dir) / args.candidate) as out:
        if gate["screened_out"]:   # reflect@ then writes its own marker; final.md keeps the prompt as it was
            metrics = screened_out_metrics(args.candidate, gate)
            write_text_atomic(out / "final.md", Path(reflect_cfg.candidates[args.candidate].prompt).read_text())
        else:
            seed_ids = {r["id"] for r in read_table(args.seed_table)}
            docs = improve_sample(read_table(args.pool), seed_ids, cfg,
                                  load_section(SeedSampleParams, "seed_sample", args.params), seed)
            metrics = run(args.candidate, cfg, reflect_cfg, judge_cfg, docs, seed, out)
    write_json(Path(args.metrics_dir) / f"{args.candidate}.json", metrics)
    summary(f"improve@{args.candidate}", started, revisions=metrics.get("revisions", 0),
            accept_start=metrics.get("accept_rate_start"), accept_final=metrics.get("accept_rate_final"))


if __name__ == "__main__":
    raise SystemExit(main())
