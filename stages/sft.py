"""Stage `sft`: joint LoRA SFT of the decision model (chains + soft-target readout) with TRL.

Reads the kept chains and all generated chains (their parsed answers are the
readout target's votes), trains one LoRA adapter with `JointSFTTrainer`,
saves the adapter and a merged model, and reports dev readout accuracy / NLL /
ECE, training tokens and throughput. The learning rate comes from the sweep
(`lr_source: sweep`, the choose_lr stage's pick) or from `sft.lr`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import file_sha256, sha256_int, stable_subset
from decision_pipeline.common.io import atomic_dir, read_json, read_jsonl, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.decision.questions import load_items
from decision_pipeline.decision.sft_data import build_joint_examples
from decision_pipeline.decision.sft_trainer import SFTSettings, dev_readout_metrics, parse_votes, train_joint
from decision_pipeline.lm.model import load_model
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.reporting.plots import plot_loss_curves


@dataclass
class SFTParams:
    lr_source: str = rule(choices=("sweep", "fixed"))
    lr: float = rule(min=0.0)                 # used when lr_source is fixed
    max_steps: int = rule(min=1)
    batch_size: int = rule(min=1)
    warmup_steps: int = rule(min=0)
    lora_r: int = rule(min=1)
    lora_alpha: int = rule(min=1)
    alpha: float = rule(min=0.0, max=1.0)     # readout target: alpha·gold + (1−alpha)·votes
    readout_weight: float = rule(min=0.0)
    readout_copies: int = rule(min=1)         # readout examples per question (the example mix)
    prompt_loss_weight: float = rule(min=0.0, max=1.0)
    max_length: int = rule(min=16)
    dev_items: int = rule(min=1)
    lora_targets: list[str] = field(default_factory=list)
    train_embeddings: bool = False            # embedding delta in the adapter (tiny from-scratch bases)
    long_chain_tokens: int = rule(min=0, default=0)  # longer examples train one per forward pass; 0 = off
    save_steps: int = rule(min=0, default=0)
    seed_offset: int = rule(min=0, default=0)  # training seed = base.seed + offset; data and splits unchanged
    threads: int = rule(min=1, default=2)


def load_training_data(p: SFTParams, tok, items: str, kept_path: str, chains_path: str) -> tuple[list[dict], int, list[dict]]:
    """Joint examples from the pool questions, kept chains and chain votes; plus dev questions."""
    pool = load_items(items, split="pool")
    kept = read_jsonl(kept_path)
    by_id = {q["id"]: q for q in pool}
    votes = parse_votes(read_jsonl(chains_path), by_id)
    examples, too_long = build_joint_examples(tok, pool, kept, votes, p.alpha, p.prompt_loss_weight,
                                              p.max_length, p.readout_copies)
    if not examples:
        raise PipelineError(f"sft: no training examples from {kept_path}; check select_chains")
    dev = stable_subset(load_items(items, split="dev"), p.dev_items, "sft-dev")
    return examples, too_long, dev


def settings_from(p: SFTParams, lr: float, seed: int, max_steps: int | None = None) -> SFTSettings:
    return SFTSettings(lr=lr, max_steps=max_steps or p.max_steps, batch_size=p.batch_size,
                       warmup_steps=p.warmup_steps, lora_r=p.lora_r, lora_alpha=p.lora_alpha,
                       lora_targets=p.lora_targets, readout_weight=p.readout_weight, seed=seed,
                       save_steps=p.save_steps, bf16=torch.cuda.is_available(), train_embeddings=p.train_embeddings,
                       long_chain_tokens=p.long_chain_tokens)


def _fingerprint(p: SFTParams, lr: float, seed: int, examples: list[dict], base_dir: str) -> str:
    """What a resumable checkpoint must match: params, rate, seed, data, base weights, training code."""
    weights = ",".join(file_sha256(str(w)) for w in sorted(Path(base_dir).glob("*.safetensors")))
    code = ",".join(file_sha256(str(Path(__file__).parent / "decision" / f)) for f in ("sft.py", "sft_train.py"))
    data = json.dumps([ex["input_ids"] + ex["readout_target"] for ex in examples])
    return f"{sha256_int(json.dumps(dataclasses.asdict(p), sort_keys=True), lr, seed, data, weights, code):016x}"


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--base", default="models/base")
    ap.add_argument("--items", default="data/items/items.parquet")
    ap.add_argument("--kept", default="data/select_chains/kept.jsonl")
    ap.add_argument("--chains", default="data/generate/chains.jsonl")
    ap.add_argument("--chosen", default="metrics/choose_lr.json")
    ap.add_argument("--work", default="data/sft_work")
    ap.add_argument("--out", default="models/sft")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(SFTParams, "sft", args.params)
    seed = load_base(args.params).seed + p.seed_offset  # a seed study varies only the SFT run
    torch.set_num_threads(p.threads)
    lr = float(read_json(args.chosen)["chosen_lr"]) if p.lr_source == "sweep" else p.lr
    model, tok = load_model(args.base), load_tokenizer(args.base)
    examples, too_long, dev = load_training_data(p, tok, args.items, args.kept, args.chains)
    work = Path(args.work)
    fingerprint = _fingerprint(p, lr, seed, examples, args.base)
    if (work / "fingerprint.txt").is_file() and (work / "fingerprint.txt").read_text().strip() != fingerprint:
        shutil.rmtree(work)  # another run's checkpoints (params, data, base model or code) must not be resumed
    work.mkdir(parents=True, exist_ok=True)
    (work / "fingerprint.txt").write_text(fingerprint + "\n")
    start_step = max((int(c.name.split("-")[1]) for c in work.glob("checkpoint-*")), default=0)
    train_started = time.time()
    peft_model, history, parts = train_joint(model, tok, examples, settings_from(p, lr, seed), work, resume=True)
    train_seconds = time.time() - train_started
    tokens_per_step = sum(len(ex["input_ids"]) for ex in examples) / len(examples) * p.batch_size
    seen_tokens = int(tokens_per_step * p.max_steps)
    if p.max_steps > start_step:  # throughput of the steps this invocation trained
        throughput = {"tokens_per_second": round(tokens_per_step * (p.max_steps - start_step) / max(train_seconds, 1e-9), 1)}
        (work / "throughput.json").write_text(json.dumps(throughput))
    else:  # resumed from the final checkpoint: nothing trained now, keep the measured figure
        throughput = json.loads((work / "throughput.json").read_text()) if (work / "throughput.json").is_file() else {"tokens_per_second": None}
    # the loss log of steps trained before a resume lives beside the checkpoints
    earlier = json.loads((work / "loss_parts.json").read_text()) if (work / "loss_parts.json").is_file() else []
    parts = [r for r in earlier if r["step"] <= start_step] + parts
    (work / "loss_parts.json").write_text(json.dumps(parts))
    merged = peft_model.merge_and_unload()
    dev_metrics = dev_readout_metrics(merged, tok, dev)
    with atomic_dir(args.out) as tmp:
        peft_model.save_pretrained(str(tmp / "adapter"))
        merged.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
    write_json("plots/sft/loss_parts.json", parts)
    plot_loss_curves({"chain (LM) loss": [{"step": r["step"], "loss": r["chain_loss"]} for r in parts],
                      "readout (soft-target) loss": [{"step": r["step"], "loss": r["readout_loss"]} for r in parts]},
                     "plots/sft/loss.png", f"joint SFT, lr={lr:g}")
    metrics = {"chosen_lr": lr, "dev": {k: dev_metrics[k] for k in ("accuracy", "nll", "ece", "n")},
               "train_examples": len(examples), "chains_too_long": too_long,
               "chain_examples": sum(ex["kind"] == "chain" for ex in examples),
               "train_tokens": seen_tokens, "tokens_per_second": throughput["tokens_per_second"],
               "final": parts[-1] if parts else None,
               "train_loss": next((h["train_loss"] for h in reversed(history) if "train_loss" in h), None)}
    write_json("metrics/sft.json", metrics)
    summary("sft", started, lr=lr, dev_acc=dev_metrics["accuracy"], dev_nll=dev_metrics["nll"],
            tok_per_s=metrics["tokens_per_second"])


if __name__ == "__main__":
    raise SystemExit(main())
