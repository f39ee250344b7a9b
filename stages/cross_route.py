"""Stage `cross_route`: one model's fast readout, another model's thinking for the doubtful items.

Every ordered pair of the evaluated models (the same-model pairs are evaluate's own routing,
kept as the reference): accuracy at evaluate's headline share with its item-bootstrap CI, the
paired gain over the readout model alone, thinking tokens per item, and the whole curve.
"""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import read_jsonl, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.common.temperatures import read_temperatures
from decision_pipeline.decision.evaluate.cross_routing import HEADLINE_SHARE, all_pairs
from decision_pipeline.decision.evaluate.config import EvaluateParams
from decision_pipeline.decision.evaluate.evaluation import records_to_table
from decision_pipeline.questions.schema import load_items
from decision_pipeline.reporting.stage_figures import plot_cross_routing


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (EvaluateParams, "evaluate"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--items", required=True)
    ap.add_argument("--evaluated", nargs="+", required=True,
                    help="evaluate@ output directories (records.jsonl + temperatures.json); names label the pairs")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--plots", required=True, help="directory for curves.json and routing.png")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(EvaluateParams, "evaluate", args.params)
    seed = load_base(args.params).seed
    questions = stable_subset(load_items(args.items, split="eval"), p.max_items, "evaluate")
    tables = {Path(d).name: records_to_table(read_jsonl(Path(d) / "records.jsonl"), questions,
                                             read_temperatures(Path(d) / "temperatures.json"))
              for d in args.evaluated}
    pairs = all_pairs(tables, HEADLINE_SHARE, p.bootstrap, seed)
    plots = Path(args.plots)
    write_json(plots / "curves.json", {k: v["curve"] for k, v in pairs.items()})
    plot_cross_routing(pairs, plots / "routing.png")
    metrics = {"share": HEADLINE_SHARE, "n": len(questions),
               "pairs": {k: {f: v for f, v in row.items() if f != "curve"} for k, row in pairs.items()}}
    write_json(args.metrics, metrics)
    best = max((k for k, v in pairs.items() if v["readout_model"] != v["thinking_model"]),
               key=lambda k: pairs[k]["accuracy"]["point"], default=None)
    summary("cross_route", started, pairs=len(pairs), best_cross=best,
            best_acc=pairs[best]["accuracy"]["point"] if best else None)


if __name__ == "__main__":
    raise SystemExit(main())
