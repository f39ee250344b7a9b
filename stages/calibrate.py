"""Stage `calibrate@{model}`: per-task temperatures on the calibration split.

Fits one temperature per question type (choice / noul / score) by NLL, for the
fast readout and, separately, for the post-chain readout, keeping a fitted
temperature only where a likelihood-ratio test against T = 1 is significant
(`evaluate.calibration_alpha`); reports ECE and NLL before and after on the
calibration split, and a resplit study of the rule on the same items.
"""
from __future__ import annotations

import argparse
import time

import torch

from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section
from decision_pipeline.decision.calibration import fit_and_report, resplit_study
from decision_pipeline.decision.questions import load_items
from stages.evaluate import EvaluateParams, answer_questions


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--items", default="data/items/items.parquet")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(EvaluateParams, "evaluate", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    questions = stable_subset(load_items(args.items, split="calibration"), p.calibration_items, "calibrate")
    logits, chains = answer_questions(args.model, questions, p, seed)
    post = [(c["post_logits"], q) for c, q in zip(chains, questions) if c["post_logits"] is not None]
    post_logits = [lg for lg, _ in post]
    post_questions = [q for _, q in post]
    report = {"readout": fit_and_report(logits, questions, p.ece_bins, p.calibration_alpha),
              "post_chain": fit_and_report(post_logits, post_questions, p.ece_bins, p.calibration_alpha),
              "resplit": {"readout": resplit_study(logits, questions, p.ece_bins, p.calibration_alpha,
                                                   p.calibration_resplits, seed),
                          "post_chain": resplit_study(post_logits, post_questions, p.ece_bins,
                                                      p.calibration_alpha, p.calibration_resplits, seed)},
              "n_items": len(questions), "post_chain_items": len(post)}
    write_json(f"data/calibrate/{args.model}/temperatures.json",
               {"readout": report["readout"]["temperatures"], "post_chain": report["post_chain"]["temperatures"]})
    write_json(f"metrics/calibrate/{args.model}.json", report)
    r = report["readout"]
    summary(f"calibrate@{args.model}", started, n=len(questions), temps=r["temperatures"],
            ece_before=r["before"]["ece"], ece_after=r["after"]["ece"])


if __name__ == "__main__":
    raise SystemExit(main())
