"""Stage `judge@{candidate}`: the rubric judge scores each reflection `judge.repeats`
times (strict JSON, one retry, then a counted failure) with the frozen prompt of the
judge-prompt loop (--prompt); hard checks and the verdict rule decide; per-candidate
aggregates as metrics (accept rate per safety score, the citation-gap flag on benign documents)."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from decision_pipeline.charter.annotate import (ReflectParams, check_judge_not_candidate, check_reflections, judge,
                                                 screen, screened_out_metrics)
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.ranking import judge_summary
from decision_pipeline.common.io import read_jsonl, write_json, write_jsonl
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (JudgeParams, "judge"))
    ap.add_argument("candidate")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--reflect-dir", default="data/charter/reflect")
    ap.add_argument("--out-dir", default="data/charter/judge")
    ap.add_argument("--metrics-dir", default="metrics/charter/judge")
    ap.add_argument("--throughput-metrics", default="metrics/charter/throughput",
                    help="throughput@candidate records: the cost screen gates this stage")
    ap.add_argument("--prompt", default="", help="the judge prompt to use instead of judge.prompt "
                                                 "(judge_prompt's frozen final.md)")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(JudgeParams, "judge", args.params)
    if args.prompt:
        cfg = replace(cfg, prompt=args.prompt)
    reflect_cfg = load_section(ReflectParams, "reflect", args.params)
    charter = reflect_cfg.charter
    check_judge_not_candidate(cfg, reflect_cfg.candidates)
    gate = screen(args.candidate, Path(args.throughput_metrics))
    source = Path(args.reflect_dir) / f"{args.candidate}.jsonl"
    rows = check_reflections(read_jsonl(source), str(source))
    records = [] if gate["screened_out"] else judge(rows, cfg, charter)
    metrics = screened_out_metrics(args.candidate, gate) if gate["screened_out"] else {"candidate": args.candidate, "kind": rows[0]["kind"] if rows else "",
               "prompt_version": rows[0]["prompt_version"] if rows else 0, "judge": cfg.name,
               "judge_kind": cfg.kind,
               "judge_prompt_version": records[0]["judge_prompt_version"] if records else 0, "repeats": cfg.repeats, **judge_summary(records, {r["id"]: r for r in rows})}
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    write_jsonl(Path(args.out_dir) / f"{args.candidate}.jsonl", records)
    Path(args.metrics_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(args.metrics_dir) / f"{args.candidate}.json", metrics)
    summary(f"judge@{args.candidate}", started, accept_rate=metrics.get("accept_rate"),
            mean=metrics.get("mean_score"), failures=metrics.get("judge_failures", 0),
            screened_out=gate["screened_out"])


if __name__ == "__main__":
    raise SystemExit(main())
