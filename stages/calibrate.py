"""Stage `calibrate@{model}`: per-task temperatures on the calibration split.

Fits one temperature per question type (choice / noul / score) by NLL, for the
fast readout and, separately, for the post-chain readout; reports ECE and NLL
before and after on the calibration split itself.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from stages.common import stats
from stages.common.hashing import stable_subset
from stages.common.io import write_json
from stages.common.log import stage_main, summary
from stages.common.params import load_base, load_section
from stages.decision.evaluate import answer_both_ways, readout_summary
from stages.decision.questions import gold_index, load_items
from stages.evaluate import EvaluateParams, sampling
from stages.lm.backends import backend_for_model
from stages.lm.model import load_model
from stages.lm.tokenizer import load_tokenizer


def fit_and_report(logits: list[np.ndarray], questions: list[dict], n_bins: int) -> dict:
    """Temperatures per task, with readout metrics at T=1 and at the fitted temperatures."""
    if not questions:
        return {"temperatures": {}, "before": None, "after": None}
    gold = [gold_index(q) for q in questions]
    temps = stats.fit_temperatures_by_group(logits, gold, [q["task"] for q in questions])
    temps = {task: round(float(t), 6) for task, t in sorted(temps.items())}
    return {"temperatures": temps, "before": readout_summary(logits, questions, None, n_bins),
            "after": readout_summary(logits, questions, temps, n_bins)}


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
    model_dir = f"models/{args.model}"
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    questions = stable_subset(load_items(args.items, split="calibration"), p.calibration_items, "calibrate")
    backend = backend_for_model(p.backend, model, tok, model_dir, p.batch_size)
    logits, chains = answer_both_ways(model, tok, backend, questions, sampling(p, seed, tok), p.batch_size)
    post = [(c["post_logits"], q) for c, q in zip(chains, questions) if c["post_logits"] is not None]
    report = {"readout": fit_and_report(logits, questions, p.ece_bins),
              "post_chain": fit_and_report([lg for lg, _ in post], [q for _, q in post], p.ece_bins),
              "n_items": len(questions), "post_chain_items": len(post)}
    write_json(f"data/calibrate/{args.model}/temperatures.json",
               {"readout": report["readout"]["temperatures"], "post_chain": report["post_chain"]["temperatures"]})
    write_json(f"metrics/calibrate/{args.model}.json", report)
    r = report["readout"]
    summary(f"calibrate@{args.model}", started, n=len(questions), temps=r["temperatures"],
            ece_before=r["before"]["ece"], ece_after=r["after"]["ece"])


if __name__ == "__main__":
    raise SystemExit(main())
