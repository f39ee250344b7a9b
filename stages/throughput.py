"""Stage `throughput@{candidate}`: serve the candidate (or use its endpoint), drive it with
its real prompt on seed documents, documents/s after a warm-up, and the linear
extrapolation to the workload's GPU-hours."""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.charter.annotate import ReflectParams, throughput
from decision_pipeline.charter.throughput import ThroughputParams
from decision_pipeline.common.io import read_table, write_json, write_timings
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (ThroughputParams, "throughput"))
    ap.add_argument("candidate")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--seed-table", default="data/charter/seed.parquet")
    ap.add_argument("--metrics-dir", default="metrics/charter/throughput")
    ap.add_argument("--timings", default=None, help="machine-dependent wall-clock figures (not a DVC output)")
    args = ap.parse_args(argv)
    started = time.time()
    tp = load_section(ThroughputParams, "throughput", args.params)
    cfg = load_section(ReflectParams, "reflect", args.params)
    m, timings = throughput(args.candidate, cfg, tp, read_table(args.seed_table), load_base(args.params).seed)
    Path(args.metrics_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(args.metrics_dir) / f"{args.candidate}.json", m)
    if args.timings:
        write_timings(args.timings, started, timings)
    summary(f"throughput@{args.candidate}", started, mode=tp.mode, docs_per_s=m["docs_per_s"],
            measured_docs_per_s=timings.get("docs_per_s"), gpu_hours=m["gpu_hours"], affordable=m["affordable"])


if __name__ == "__main__":
    raise SystemExit(main())
