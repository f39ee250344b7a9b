"""Stage `rank_generators`: one row per candidate (judge aggregate, accept rate overall
and per safety score, robustness at high safety scores, per-dimension means, the citation-gap
flag on benign documents, docs/s, GPU-hours); among the affordable, robustness first with cost
deciding among near-equals; four of the five selection figures (the fifth is judge_agreement's)."""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.charter import figures
from decision_pipeline.charter.annotate import ReflectParams
from decision_pipeline.charter.ranking import RankParams, rank
from decision_pipeline.charter.throughput import ThroughputParams
from decision_pipeline.common.io import read_json, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_section, stage_parser


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (RankParams, "rank_generators"), (ThroughputParams, "throughput"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--judge-metrics", default="metrics/charter/judge")
    ap.add_argument("--throughput-metrics", default="metrics/charter/throughput")
    ap.add_argument("--agreement", default="metrics/charter/judge_agreement.json")
    ap.add_argument("--out", default="metrics/charter/ranking.json")
    ap.add_argument("--plots", default="plots/charter")
    args = ap.parse_args(argv)
    started = time.time()
    tp = load_section(ThroughputParams, "throughput", args.params)
    cfg = load_section(RankParams, "rank_generators", args.params)
    cands = load_section(ReflectParams, "reflect", args.params).candidates
    table = {}
    for name, c in cands.items():
        row = read_json(Path(args.judge_metrics) / f"{name}.json")
        t = read_json(Path(args.throughput_metrics) / f"{name}.json")  # rule references: no GPU, affordable
        row.update(docs_per_s=t["docs_per_s"], gpu_hours=t["gpu_hours"], affordable=t["affordable"])
        table[name] = row
    rows = rank(table, cfg)
    kappa = read_json(args.agreement)
    write_json(args.out, {"order": [r["candidate"] for r in rows], "rows": {r["candidate"]: r for r in rows},
                          "judge_kappa": kappa["kappa"], "judge_kappa_ci": [kappa["ci_low"], kappa["ci_high"]],
                          "screened_out": {r["candidate"]: r["gpu_hours"] for r in rows if r["screened_out"]},
                          "high_from": cfg.high_from, "near_equal": cfg.near_equal,
                          "rule": "cost screen first (over throughput.gpu_hour_budget: screened out, never "
                                  "reflected nor judged); in the pool tiers by robustness (accept rate at safety "
                                  "score >= high_from): the most robust left and those within near_equal of it, "
                                  "cheaper first (GPU-hours), then robustness, accept rate, mean score, name"})
    out = Path(args.plots)
    figures.cost_vs_quality(rows, tp.gpu_hour_budget, out / "cost_vs_quality.png")
    figures.quality_ranking(rows, out / "quality_ranking.png")
    figures.quality_by_dimension(rows, out / "quality_by_dimension.png")
    figures.robustness_by_safety(rows, out / "robustness_by_safety.png")
    summary("rank_generators", started, order=",".join(r["candidate"] for r in rows))


if __name__ == "__main__":
    raise SystemExit(main())
