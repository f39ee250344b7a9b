"""Stage `evaluate@{model}`: readout, thinking and post-chain answers on the eval split.

Readout: option-label probabilities after `Answer:` (one forward pass), with the
model's calibrated per-task temperatures. Thinking: one sampled chain per
question, answer parsed; post-chain readout from the chain's exact token ids.
Adds routing (lowest-margin share to thinking), disagreement AUROC, bootstrap
CIs, and for every model but the base a paired bootstrap against the base.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from decision_pipeline.common import stats
from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import read_json, read_jsonl, write_json, write_jsonl
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.decision import metrics as dm
from decision_pipeline.decision.answering import answer_both_ways
from decision_pipeline.decision.questions import load_items
from decision_pipeline.lm.backends import BACKENDS, SamplingSettings, backend_for_model
from decision_pipeline.lm.model import load_model
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.reporting.plots import plot_accuracy_grid, plot_reliability, plot_routing_curve


@dataclass
class EvaluateParams:
    backend: str = rule(choices=BACKENDS)
    max_items: int = rule(min=1)
    calibration_items: int = rule(min=1)
    batch_size: int = rule(min=1)
    max_new_tokens: int = rule(min=1)
    temperature: float = rule(min=0.0)
    top_p: float = rule(min=0.0, max=1.0)
    ece_bins: int = rule(min=2)
    bootstrap: int = rule(min=10)
    baseline: str = "base"
    calibration_alpha: float = rule(min=0.0, max=1.0, default=0.05)  # LR-test level a temperature must pass
    calibration_resplits: int = rule(min=0, default=100)  # halvings in calibrate's study of that rule
    threads: int = rule(min=1, default=2)



def sampling(p: EvaluateParams, seed: int, tok) -> SamplingSettings:
    return SamplingSettings(max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
                            seed=seed, stop_token_ids=(tok.eos_token_id,))


def answer_questions(model_name: str, questions: list[dict], p: EvaluateParams,
                     seed: int) -> tuple[list[np.ndarray], list[dict]]:
    """Load models/<name> and answer each question by readout and by one sampled chain (calibrate uses it too)."""
    model_dir = f"models/{model_name}"
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    backend = backend_for_model(p.backend, model, tok, model_dir, p.batch_size)
    return answer_both_ways(model, tok, backend, questions, sampling(p, seed, tok), p.batch_size)


def records_to_table(records: list[dict], questions: list[dict], temps: dict) -> dict:
    """Rebuild the per-item table from stored records (used for the baseline model)."""
    return dm.item_table(questions, [np.array(r["readout_logits"]) for r in records],
                         [r["thinking_pred"] for r in records], [r["chain_tokens"] for r in records],
                         [r["finish_reason"] for r in records],
                         [None if r["post_logits"] is None else np.array(r["post_logits"]) for r in records],
                         temps.get("readout"), temps.get("post_chain"))


def routing_at_30(curve: list[dict]) -> dict:
    """Gap recovered when the lowest-margin 30% think, plus the plain accuracy change it is a ratio of."""
    row = next(r for r in curve if abs(r["fraction"] - 0.3) < 1e-9)
    return {"gap_recovered_at_30": dm.gap_recovered(curve, 0.3), "accuracy_at_30": row["accuracy"],
            "accuracy_change_at_30": round(row["accuracy"] - row["readout_accuracy"], 6),
            "thinking_minus_readout": round(row["thinking_accuracy"] - row["readout_accuracy"], 6)}


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model", help="model name: models/<name> is evaluated")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--items", default="data/items/items.parquet")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(EvaluateParams, "evaluate", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    temps = read_json(f"data/calibrate/{args.model}/temperatures.json")
    questions = stable_subset(load_items(args.items, split="eval"), p.max_items, "evaluate")
    logits, chains = answer_questions(args.model, questions, p, seed)
    records = [{"id": q["id"], "family": q["family"], "level": q["level"], "task": q["task"],
                "readout_logits": [round(float(x), 5) for x in lg], "thinking_pred": c["thinking_pred"],
                "chain_tokens": c["chain_tokens"], "finish_reason": c["finish_reason"], "chain": c["text"],
                "post_logits": None if c["post_logits"] is None else [round(float(x), 5) for x in c["post_logits"]]}
               for q, lg, c in zip(questions, logits, chains)]
    table = records_to_table(records, questions, temps)
    raw = records_to_table(records, questions, {})
    head = dm.headline(table, p.ece_bins)
    curve = dm.routing_curve(table)
    metrics = {"n_items": len(questions), **head,
               "readout_uncalibrated": dm.headline(raw, p.ece_bins)["readout"],
               "ece_calibrated": head["readout"]["ece"], "temperatures": temps,
               "ece_change": dm.ece_change(table, raw, p.ece_bins, p.bootstrap, seed),
               "ece_noise_floor": {k: round(v, 6) for k, v in
                                   stats.ece_noise_floor(table["confidence"], p.ece_bins, 200, seed).items()},
               "by_family": {f: dm.headline(dm.subset(table, table["family"] == f), p.ece_bins)["readout"]
                             for f in sorted(set(table["family"].tolist()))},
               "routing": routing_at_30(curve),
               "cis": dm.headline_cis(table, p.bootstrap, seed)}
    if args.model != p.baseline:
        base_temps = read_json(f"data/calibrate/{p.baseline}/temperatures.json")
        base_records = read_jsonl(f"data/evaluate/{p.baseline}/records.jsonl")
        metrics["vs_base"] = dm.vs_baseline(table, records_to_table(base_records, questions, base_temps), p.bootstrap, seed)
    write_jsonl(f"data/evaluate/{args.model}/records.jsonl", records)
    plots = Path(f"plots/evaluate/{args.model}")
    write_json(plots / "routing.json", curve)
    write_json(plots / "accuracy_by_group.json", dm.accuracy_grid(table))
    plot_routing_curve({args.model: curve}, plots / "routing.png")
    plot_reliability({"calibrated": dm.reliability(table, p.ece_bins), "T=1": dm.reliability(raw, p.ece_bins)},
                     plots / "reliability.png")
    plot_accuracy_grid(dm.accuracy_grid(table), plots / "accuracy_grid.png", f"{args.model}: accuracy by family × level")
    write_json(f"metrics/evaluate/{args.model}.json", metrics)
    summary(f"evaluate@{args.model}", started, n=len(questions), readout_acc=head["readout"]["accuracy"],
            thinking_acc=head["thinking"]["accuracy"], parse_rate=head["thinking"]["parse_rate"],
            gap_recovered_at_30=metrics["routing"]["gap_recovered_at_30"])


if __name__ == "__main__":
    raise SystemExit(main())
