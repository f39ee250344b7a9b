"""One SFT run end to end: training data, resumable training, dev readout, loss log.

Why here and not in the stage: `sft` and `lr_sweep` run the same recipe (the
sweep on a seeded subset for fewer steps), and the resume bookkeeping (which
checkpoints may be continued, the loss log and throughput across a kill) is
logic that deserves tests.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.fingerprint import claim_work_dir, code_fingerprint, model_fingerprint, run_fingerprint
from decision_pipeline.common.hashing import make_random, stable_subset
from decision_pipeline.common.io import read_jsonl
from decision_pipeline.decision import sft_data, sft_trainer
from decision_pipeline.decision.questions import load_items
from decision_pipeline.decision.sft_data import build_joint_examples
from decision_pipeline.decision.lr_choice import LrSweepParams
from decision_pipeline.decision.sft_trainer import SFTParams, dev_readout_metrics, parse_votes, train_joint


def load_training_data(p: SFTParams, tok: PreTrainedTokenizerBase, items: str, kept_path: str,
                       chains_path: str) -> tuple[list[dict], int, list[dict]]:
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


def sft_fingerprint(p: SFTParams, lr: float, seed: int, examples: list[dict], base_dir: str) -> str:
    """What a resumable checkpoint must match: params, rate, seed, data, base weights, training code."""
    data = [ex["input_ids"] + ex["readout_target"] for ex in examples]
    return run_fingerprint(p, lr, seed, data, model_fingerprint(base_dir), code_fingerprint(sft_data, sft_trainer))


def completed_step(work: Path) -> int:
    """The last checkpoint step in `work` (0 when none)."""
    return max((int(c.name.split("-")[1]) for c in work.glob("checkpoint-*")), default=0)


def merge_loss_log(work: Path, start_step: int, parts: list[dict]) -> list[dict]:
    """The loss log of the whole run: steps up to the resumed checkpoint from the saved log, then this run's."""
    saved = work / "loss_parts.json"
    earlier = json.loads(saved.read_text()) if saved.is_file() else []
    merged = [r for r in earlier if r["step"] <= start_step] + parts
    tmp = saved.with_suffix(".tmp")
    tmp.write_text(json.dumps(merged))
    tmp.replace(saved)
    return merged


def run_sft(p: SFTParams, lr: float, seed: int, model: PreTrainedModel, tok: PreTrainedTokenizerBase,
            base_dir: str, items: str, kept: str, chains: str,
            work_dir: str) -> tuple[PreTrainedModel, PreTrainedModel, dict, list[dict]]:
    """Train (resuming a matching run in `work_dir`) and measure the merged model on dev questions.

    Returns (peft model, merged model, metrics, loss parts).
    """
    examples, too_long, dev = load_training_data(p, tok, items, kept, chains)
    work = Path(work_dir)
    claim_work_dir(work, sft_fingerprint(p, lr, seed, examples, base_dir))
    start_step = completed_step(work)
    started = time.time()
    peft_model, history, parts = train_joint(model, tok, examples, p, lr, seed, work, resume=True,
                                             on_save=lambda so_far: merge_loss_log(work, start_step, so_far))
    seconds = time.time() - started
    tokens_per_step = sum(len(ex["input_ids"]) for ex in examples) / len(examples) * p.batch_size
    throughput_file = work / "throughput.json"
    if p.max_steps > start_step:  # throughput of the steps this invocation trained
        throughput = {"tokens_per_second": round(tokens_per_step * (p.max_steps - start_step) / max(seconds, 1e-9), 1)}
        throughput_file.write_text(json.dumps(throughput))
    else:  # resumed from the final checkpoint: nothing trained now, keep the measured figure
        throughput = json.loads(throughput_file.read_text()) if throughput_file.is_file() else {"tokens_per_second": None}
    parts = merge_loss_log(work, start_step, parts)
    merged = peft_model.merge_and_unload()
    dev_metrics = dev_readout_metrics(merged, tok, dev)
    metrics = {"chosen_lr": lr, "dev": {k: dev_metrics[k] for k in ("accuracy", "nll", "ece", "n")},
               "train_examples": len(examples), "chains_too_long": too_long,
               "chain_examples": sum(ex["kind"] == "chain" for ex in examples),
               "readout_targets": readout_target_counts(examples),
               "train_tokens": int(tokens_per_step * p.max_steps),
               "tokens_per_second": throughput["tokens_per_second"],
               "final": parts[-1] if parts else None,
               "train_loss": next((h["train_loss"] for h in reversed(history) if "train_loss" in h), None)}
    return peft_model, merged, metrics, parts


def readout_target_counts(examples: list[dict]) -> dict:
    """How many readout targets were actually soft, and why (the item's own target, or chain votes)."""
    readouts = [ex for ex in examples if ex["kind"] == "readout"]
    return {"total": len(readouts), "soft": sum(ex["target_soft"] for ex in readouts),
            "soft_from_item": sum(ex["gold_soft"] for ex in readouts),
            "with_model_votes": sum(ex["voted"] for ex in readouts)}


def sweep_point(sweep: LrSweepParams, p: SFTParams, lr: float, seed: int, model: PreTrainedModel,
                tok: PreTrainedTokenizerBase, items: str, kept: str, chains: str) -> dict:
    """A short SFT at `lr` on the sweep's seeded subset (the same at every rate); dev readout metrics."""
    examples, _, dev = load_training_data(p, tok, items, kept, chains)
    make_random(seed, "lr_sweep").shuffle(examples)
    subset = examples[: sweep.max_examples]
    with tempfile.TemporaryDirectory(prefix="lr_sweep.") as work:
        peft_model, _, parts = train_joint(model, tok, subset, p, lr, seed, work, max_steps=sweep.max_steps)
    dev_metrics = dev_readout_metrics(peft_model, tok, dev)
    return {"lr": lr, "dev": dev_metrics, "steps": sweep.max_steps, "examples": len(subset),
            "final": parts[-1] if parts else None}
