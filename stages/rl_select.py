"""Stage `rl_select`: the probe questions that carry signal, screened by the calibrated readout, mixed.

Keeps questions with 1..k-1 of k probe chains right whose calibrated readout
gold probability lies in [gold_prob_min, gold_prob_max], never a twin of a
held-out question or of another candidate (shuffled options are the same
question), fresh questions never twins of SFT ones, mixed at `fresh_fraction`.
Counts what each rule removed; zero eligible questions is an error naming the
rule that removed the last of them.
"""
from __future__ import annotations

import time

from decision_pipeline.common.io import read_json, read_jsonl, write_json, write_jsonl
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.questions.schema import load_items
from decision_pipeline.decision.rl.config import RlSelectParams
from decision_pipeline.decision.rl.selection import select_questions


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (RlSelectParams, "rl_select"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--probe", required=True, help="rl_probe's probe.jsonl")
    ap.add_argument("--temps", required=True, help="calibrate@sft's temperatures.json")
    ap.add_argument("--items", required=True)
    ap.add_argument("--out", required=True, help="selected questions (JSONL, training order)")
    ap.add_argument("--metrics", required=True)
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(RlSelectParams, "rl_select", args.params)
    seed = load_base(args.params).seed
    items = load_items(args.items)
    by_id = {q["id"]: q for q in items}
    rows = read_jsonl(args.probe)
    temps = read_json(args.temps)["readout"]
    kept, metrics = select_questions(rows, by_id, [q for q in items if q["split"] == "pool"],
                                     [q for q in items if q["split"] in ("bench", "dev", "eval", "calibration")],
                                     temps, p, seed)
    write_jsonl(args.out, kept)
    write_json(args.metrics, metrics)
    summary("rl_select", started, candidates=metrics["candidates"], kept=metrics["kept"],
            fresh_fraction=metrics["fresh_fraction"],
            dropped=" ".join(f"{k}:{v}" for k, v in metrics["dropped"].items() if v))


if __name__ == "__main__":
    raise SystemExit(main())
