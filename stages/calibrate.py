"""Stage `calibrate@{model}`: per-task temperatures on the calibration split.

Fits one temperature per question type (choice / noul / score) by NLL, for the
fast readout and, separately, for the post-chain readout, keeping a fitted
temperature only where 2-fold cross-fitting shows it lowers held-out NLL;
reports ECE and NLL before and after on the calibration split itself.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from stages.common import stats
from stages.common.hashing import stable_split, stable_subset
from stages.common.io import write_json
from stages.common.log import stage_main, summary
from stages.common.params import load_base, load_section
from stages.decision.evaluate import answer_both_ways, readout_summary
from stages.decision.questions import gold_index, load_items
from stages.evaluate import EvaluateParams, sampling
from stages.lm.backends import backend_for_model
from stages.lm.model import load_model
from stages.lm.tokenizer import load_tokenizer


def cross_fitted_gain(logits: list[np.ndarray], gold: list[int], folds: list[int]) -> float:
    """Mean held-out NLL at T=1 minus at the temperature fitted on the other fold (2 folds).

    Positive means the fitted temperature generalises; near zero or negative means
    the NLL is flat in T and the fitted value is noise.
    """
    gains = []
    for k in (0, 1):
        train = [i for i, f in enumerate(folds) if f != k]
        test = [i for i, f in enumerate(folds) if f == k]
        if not train or not test:
            return 0.0
        t = stats.fit_temperature([logits[i] for i in train], [gold[i] for i in train])
        held = [logits[i] for i in test]
        held_gold = [gold[i] for i in test]
        gains.append(stats.nll(stats.softmax_with_temperature(held, 1.0), held_gold)
                     - stats.nll(stats.softmax_with_temperature(held, t), held_gold))
    return float(np.mean(gains))


def fit_and_report(logits: list[np.ndarray], questions: list[dict], n_bins: int, min_gain: float = 0.0) -> dict:
    """Temperatures per task, with readout metrics at T=1 and at the chosen temperatures.

    A task keeps its fitted temperature only if 2-fold cross-fitting on the
    calibration items lowers held-out NLL by more than `min_gain` nats; otherwise
    it stays at 1.0 (a temperature fitted on a flat NLL curve moves ECE by noise).
    """
    if not questions:
        return {"temperatures": {}, "before": None, "after": None, "cross_fitted_gain": {}}
    temps, gains = {}, {}
    for task in sorted({q["task"] for q in questions}):
        idx = [i for i, q in enumerate(questions) if q["task"] == task]
        lg, gold = [logits[i] for i in idx], [gold_index(questions[i]) for i in idx]
        folds = [stable_split(questions[i]["id"], {"a": 0.5, "b": 0.5}, salt="calibrate") == "b" for i in idx]
        gains[task] = round(cross_fitted_gain(lg, gold, [int(f) for f in folds]), 6)
        temps[task] = round(float(stats.fit_temperature(lg, gold)), 6) if gains[task] > min_gain else 1.0
    return {"temperatures": temps, "cross_fitted_gain": gains,
            "before": readout_summary(logits, questions, None, n_bins),
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
    report = {"readout": fit_and_report(logits, questions, p.ece_bins, p.calibration_min_gain),
              "post_chain": fit_and_report([lg for lg, _ in post], [q for _, q in post], p.ece_bins,
                                           p.calibration_min_gain),
              "n_items": len(questions), "post_chain_items": len(post)}
    write_json(f"data/calibrate/{args.model}/temperatures.json",
               {"readout": report["readout"]["temperatures"], "post_chain": report["post_chain"]["temperatures"]})
    write_json(f"metrics/calibrate/{args.model}.json", report)
    r = report["readout"]
    summary(f"calibrate@{args.model}", started, n=len(questions), temps=r["temperatures"],
            ece_before=r["before"]["ece"], ece_after=r["after"]["ece"])


if __name__ == "__main__":
    raise SystemExit(main())
