"""Stage `evaluate@{model}`: readout, thinking and post-chain answers on the eval split.

Readout: option-label probabilities after `Answer:` (one forward pass), with the
model's calibrated per-task temperatures. Thinking: one sampled chain per
question, answer parsed; post-chain readout from the chain's exact token ids.
Adds routing (lowest-margin share to thinking), disagreement AUROC, bootstrap
CIs, and with `--baseline` a paired bootstrap against that model's records. The
Decision Score's label prior is fitted on the calibration split of the same items
file, never on the eval questions it scores.
"""
from __future__ import annotations

import time
from pathlib import Path

from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import read_json, read_jsonl, write_json, write_jsonl
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, stage_parser
from decision_pipeline.common.temperatures import read_temperatures
from decision_pipeline.decision.evaluate.config import EvaluateParams
from decision_pipeline.lm.params import RuntimeParams
from decision_pipeline.questions.schema import load_items, load_split


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = stage_parser(__doc__, (EvaluateParams, "evaluate"))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--model", required=True, help="model directory; its name labels the outputs")
    ap.add_argument("--temps", required=True, help="calibrate's temperatures.json for this model")
    ap.add_argument("--items", required=True)
    ap.add_argument("--out", required=True, help="directory for records.jsonl and temperatures.json")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--plots", required=True, help="directory for the plot data and PNGs")
    ap.add_argument("--baseline", default="", help="another model's evaluate output directory to compare with "
                                                   "(paired, same questions); empty = none")
    ap.add_argument("--router", default="", help="calibrate's router.json (learned router); empty = margin only")
    args = ap.parse_args(argv)
    # the model libraries (torch, transformers, peft) only after the arguments parsed: `--help` and a wrong
    # flag answer in under a second instead of paying ~5 s of imports
    import torch
    from decision_pipeline.decision.evaluate.answering import answer_questions
    from decision_pipeline.decision.evaluate.evaluation import PRIOR_SPLIT, answer_records, evaluate_records
    from decision_pipeline.reporting.stage_figures import plot_accuracy_grid, plot_reliability, plot_routing_curve
    started = time.time()
    p = load_section(EvaluateParams, "evaluate", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.answering.threads)
    name = Path(args.model).name
    temps = read_temperatures(args.temps)
    questions = stable_subset(load_items(args.items, split="eval"), p.max_items, "evaluate")
    prior_questions = load_split(args.items, PRIOR_SPLIT)
    runtime = load_section(RuntimeParams, "runtime", args.params)
    logits, chains = answer_questions(args.model, questions, p.answering, seed, runtime)
    records = answer_records(questions, logits, chains)
    baseline = None
    if args.baseline:
        base_dir = Path(args.baseline)
        baseline = (base_dir.name, read_jsonl(base_dir / "records.jsonl"),
                    read_temperatures(base_dir / "temperatures.json"))
    router = read_json(args.router) if args.router else None
    metrics, plot_data = evaluate_records(records, questions, temps, p, seed, baseline, model_name=name,
                                          router=router, prior_questions=prior_questions)
    write_jsonl(f"{args.out}/records.jsonl", records)
    write_json(f"{args.out}/temperatures.json", temps)
    plots = Path(args.plots)
    write_json(plots / "routing.json", plot_data["routing"])
    write_json(plots / "accuracy_by_group.json", plot_data["accuracy_grid"])
    plot_routing_curve({name: plot_data["routing"]}, plots / "routing.png")
    plot_reliability(plot_data["reliability"], plots / "reliability.png")
    plot_accuracy_grid(plot_data["accuracy_grid"], plots / "accuracy_grid.png", f"{name}: accuracy by family × level")
    write_json(args.metrics, metrics)
    summary(f"evaluate@{name}", started, n=len(questions), readout_acc=metrics["readout"]["accuracy"],
            thinking_acc=metrics["thinking"]["accuracy"], parse_rate=metrics["thinking"]["parse_rate"],
            gap_recovered_at_30=metrics["routing"]["gap_recovered_at_30"])


if __name__ == "__main__":
    raise SystemExit(main())
