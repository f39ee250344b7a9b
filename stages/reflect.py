"""Stage `reflect@{candidate}`: the candidate writes a two-voice reflection on every seed
document with the prompt improve@{candidate} ended on (rule-based reference generators, or
a model behind an OpenAI-compatible endpoint that the stage serves itself when
`serve_model` is set). With `reflect.engine: ray` the documents are reflected in chunks by Ray
actors (decision_pipeline/charter/ray_reflect.py), byte for byte the same file."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from decision_pipeline.charter.annotate import ReflectParams, reflect, screen, screened_out_metrics
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.common.io import read_table, write_json, write_jsonl
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main(ray_exit=True)  # engine ray: the process ends once the outputs are written
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (ReflectParams, "reflect"))
    ap.add_argument("candidate")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--seed-table", default="data/charter/seed.parquet")
    ap.add_argument("--out-dir", default="data/charter/reflect")
    ap.add_argument("--metrics-dir", default="metrics/charter/reflect")
    ap.add_argument("--prompt", default="",
                    help="the prompt file to use instead of the candidate's (improve@candidate's final.md)")
    ap.add_argument("--throughput-metrics", default="metrics/charter/throughput",
                    help="throughput@candidate records: the cost screen gates this stage")
    args = ap.parse_args(argv)
    started = time.time()
    cfg = load_section(ReflectParams, "reflect", args.params)
    checks = load_section(JudgeParams, "judge", args.params).checks
    if args.prompt and args.candidate in cfg.candidates:
        cfg.candidates[args.candidate] = replace(cfg.candidates[args.candidate], prompt=args.prompt)
    gate = screen(args.candidate, Path(args.throughput_metrics))
    if gate["screened_out"]:
        rows, metrics = [], {**screened_out_metrics(args.candidate, gate), "missing_voice": 0, "seconds": 0.0}
    else:
        rows, metrics = reflect(args.candidate, cfg, checks, read_table(args.seed_table), load_base(args.params).seed,
                                Path(args.out_dir))
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    write_jsonl(Path(args.out_dir) / f"{args.candidate}.jsonl", rows)
    Path(args.metrics_dir).mkdir(parents=True, exist_ok=True)
    seconds = metrics.pop("seconds")  # wall time differs on every run: the summary line, not the diffed metrics
    write_json(Path(args.metrics_dir) / f"{args.candidate}.json", metrics)
    summary(f"reflect@{args.candidate}", started, n=metrics["n"], missing_voice=metrics["missing_voice"],
            seconds=seconds)


if __name__ == "__main__":
    raise SystemExit(main())
