"""Stage `lr_sweep@{lr}`: a short joint SFT at one learning rate on a subset; dev NLL decides.

Same data and loss as `sft`, `lr_sweep.max_steps` steps on `lr_sweep.max_examples`
examples; the choose_lr stage compares the dev readout NLL across rates.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass

import torch

from decision_pipeline.common.hashing import make_random
from decision_pipeline.common.io import write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.decision.sft_trainer import dev_readout_metrics, train_joint
from decision_pipeline.lm.model import load_model
from decision_pipeline.lm.bpe import load_tokenizer
from stages.sft import SFTParams, load_training_data, settings_from


@dataclass
class LrSweepParams:
    lrs: list[float] = rule(min=0.0)
    max_steps: int = rule(min=1)
    max_examples: int = rule(min=1)


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("lr", type=float)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--base", default="models/base")
    ap.add_argument("--items", default="data/items/items.parquet")
    ap.add_argument("--kept", default="data/select_chains/kept.jsonl")
    ap.add_argument("--chains", default="data/generate/chains.jsonl")
    args = ap.parse_args(argv)
    started = time.time()
    sweep = load_section(LrSweepParams, "lr_sweep", args.params)
    p = load_section(SFTParams, "sft", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    model, tok = load_model(args.base), load_tokenizer(args.base)
    examples, _, dev = load_training_data(p, tok, args.items, args.kept, args.chains)
    make_random(seed, "lr_sweep").shuffle(examples)  # same subset at every rate
    subset = examples[: sweep.max_examples]
    with tempfile.TemporaryDirectory(prefix="lr_sweep.") as work:
        peft_model, _, parts = train_joint(model, tok, subset, settings_from(p, args.lr, seed, sweep.max_steps), work)
    dev_metrics = dev_readout_metrics(peft_model, tok, dev)
    metrics = {"lr": args.lr, "dev": dev_metrics, "steps": sweep.max_steps, "examples": len(subset),
               "final": parts[-1] if parts else None}
    write_json(f"metrics/lr_sweep/{args.lr:g}.json", metrics)
    summary(f"lr_sweep@{args.lr:g}", started, dev_nll=dev_metrics["nll"], dev_acc=dev_metrics["accuracy"])


if __name__ == "__main__":
    raise SystemExit(main())
