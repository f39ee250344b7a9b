"""One SFT run end to end: training data, resumable training, dev readout, loss log.

Why here and not in the stage: `sft` and `lr_sweep` run the same recipe (the
sweep on a seeded subset for fewer steps), and the resume bookkeeping (which
checkpoints may be continued, the loss log and throughput across a kill) is
logic that deserves tests.

Under several processes (`sft.launch`) every rank builds the same examples and
trains; rank 0 alone claims the work directory (the others wait), writes the loss
log and throughput, and measures the dev readout; the other ranks get None.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.fingerprint import code_fingerprint, model_fingerprint, run_fingerprint
from decision_pipeline.common.workdir import claim, content_params, last_step
from decision_pipeline.common.hashing import make_random, stable_subset
from decision_pipeline.common.io import read_jsonl, write_json, write_text_atomic
from decision_pipeline.common.log import info
from decision_pipeline.common.progress import TrainingProgress
from decision_pipeline.decision.sft import data as sft_data, trainer as sft_trainer
from decision_pipeline.lm.launch import is_main, on_main_then_all
from decision_pipeline.questions.schema import load_items
from decision_pipeline.decision.sft.data import build_joint_examples
from decision_pipeline.decision.sft.config import LrSweepParams, SFTParams
from decision_pipeline.decision.sft.trainer import (LIVE_SHOWN, dev_readout_metrics, joint_values, parse_votes,
                                                    train_joint)


def load_training_data(p: SFTParams, tok: PreTrainedTokenizerBase, items: str, kept_path: str,
                       chains_path: str) -> tuple[list[dict], int, list[dict]]:
    """Joint examples from the pool questions, kept chains and chain votes; plus dev questions."""
    pool = load_items(items, split="pool")
    kept = read_jsonl(kept_path)
    by_id = {q["id"]: q for q in pool}
    votes = parse_votes(read_jsonl(chains_path), by_id)
    examples, too_long = build_joint_examples(tok, pool, kept, votes, p.alpha, p.prompt_loss_weight,
                                              p.max_length, p.readout_copies, target_mode=p.target_mode)
    if not examples:
        raise PipelineError(f"sft: no training examples from {kept_path}; check select_chains")
    dev = stable_subset(load_items(items, split="dev"), p.dev_items, "sft-dev")
    return examples, too_long, dev


def sft_fingerprint(p: SFTParams, lr: float, seed: int, examples: list[dict], base_dir: str) -> str:
    """What a resumable checkpoint must match: params, rate, seed, data, base weights, training code."""
    data = [ex["input_ids"] + ex["readout_target"] for ex in examples]
    return run_fingerprint(content_params(p), lr, seed, data, model_fingerprint(base_dir),
                           code_fingerprint(sft_data, sft_trainer))


COMPLETE = "complete"  # written into a checkpoint directory after everything else: the checkpoint is whole


def prune_incomplete(work: Path) -> list[str]:
    """Remove checkpoint directories a kill left half-written (no `complete` marker); their names."""
    removed = []
    for ckpt in sorted(work.glob("checkpoint-*")):
        if not (ckpt / COMPLETE).is_file():
            shutil.rmtree(ckpt)
            removed.append(ckpt.name)
    return removed


def completed_step(work: Path) -> int:
    """The last complete checkpoint step in `work` (0 when none)."""
    return last_step(work, COMPLETE)


def checkpoint_loss_log(work: Path, step: int) -> list[dict]:
    """The loss rows up to `step`, as the checkpoint of that step recorded them ([] for a fresh start)."""
    saved = work / f"checkpoint-{step}" / "loss_parts.json"
    return json.loads(saved.read_text()) if step and saved.is_file() else []


def seal_checkpoint(work: Path, step: int, rows: list[dict]) -> None:
    """Write the loss log into checkpoint `step`, then mark it complete: a kill between the trainer's
    save and this leaves an unmarked checkpoint, which the next run removes and retrains."""
    ckpt = work / f"checkpoint-{step}"
    write_json(ckpt / "loss_parts.json", rows)
    write_text_atomic(ckpt / COMPLETE, f"{step}\n")


def run_sft(p: SFTParams, lr: float, seed: int, model: PreTrainedModel, tok: PreTrainedTokenizerBase,
            base_dir: str, items: str, kept: str, chains: str,
            work_dir: str, live_dir: str | None = None) -> tuple[PreTrainedModel, PreTrainedModel, dict, list[dict]] | None:
    """Train (resuming a matching run in `work_dir`) and measure the merged model on dev questions.

    Progress goes to the terminal; with `live_dir` every step's losses also go to DVCLive files there
    (a resumed run replays the sealed checkpoint's loss log first, so they equal an uninterrupted run's).
    Returns (peft model, merged model, metrics, loss parts) on rank 0, None on the other ranks.
    """
    examples, too_long, dev = load_training_data(p, tok, items, kept, chains)
    work = Path(work_dir)
    fingerprint = sft_fingerprint(p, lr, seed, examples, base_dir)
    on_main_then_all(lambda: claim(work, fingerprint, "sft"))
    on_main_then_all(lambda: [info("sft", f"{work}/{name}: half-written by a killed run; removed, retraining "
                                          "from the checkpoint before it") for name in prune_incomplete(work)])
    start_step = completed_step(work)
    earlier = checkpoint_loss_log(work, start_step)
    started = time.time()
    with TrainingProgress.open("sft", live_dir, main=is_main(), shown=LIVE_SHOWN) as progress:
        progress.replay((r["step"], joint_values(r, p.readout_weight)) for r in earlier)
        peft_model, _, parts = train_joint(
            model, tok, examples, p, lr, seed, work, resume=True,
            on_save=lambda step, so_far: seal_checkpoint(work, step, earlier + so_far), progress=progress)
    seconds = time.time() - started
    if not is_main():
        return None
    tokens_per_step = sum(len(ex["input_ids"]) for ex in examples) / len(examples) * p.batch_size
    # throughput of the steps this invocation trained (machine-dependent: the stage writes it to its timings)
    tokens_per_second = (round(tokens_per_step * (p.max_steps - start_step) / max(seconds, 1e-9), 1)
                         if p.max_steps > start_step else None)
    parts = earlier + parts
    merged = peft_model.merge_and_unload()
    dev_metrics = dev_readout_metrics(merged, tok, dev)
    metrics = {"chosen_lr": lr, "dev": {k: dev_metrics[k] for k in ("accuracy", "nll", "ece", "n")},
               "train_examples": len(examples), "chains_too_long": too_long,
               "chain_examples": sum(ex["kind"] == "chain" for ex in examples),
               "readout_targets": {**readout_target_counts(examples), "mode": p.target_mode},
               "train_tokens": int(tokens_per_step * p.max_steps),
               "tokens_per_second": tokens_per_second,
               "final": parts[-1] if parts else None,
               "train_loss": mean_joint_loss(parts, p.readout_weight)}
    return peft_model, merged, metrics, parts


def mean_joint_loss(parts: list[dict], readout_weight: float) -> float | None:
    """The training loss averaged over every step, from the whole per-step log.

    Why not the trainer's `train_loss`: after a resume transformers divides the loss summed
    over the steps *this* process trained by all steps, so a resumed run reported about
    half the value an uninterrupted one does (2.08 vs 3.99 on the default run).
    """
    if not parts:
        return None
    return round(sum(r["chain_loss"] + readout_weight * r["readout_loss"] for r in parts) / len(parts), 5)


def readout_target_counts(examples: list[dict]) -> dict:
    """How many readout targets were actually soft, and why (the item's own target, or chain votes)."""
    readouts = [ex for ex in examples if ex["kind"] == "readout"]
    return {"total": len(readouts), "soft": sum(ex["target_soft"] for ex in readouts),
            "soft_from_item": sum(ex["gold_soft"] for ex in readouts),
            "with_model_votes": sum(ex["voted"] for ex in readouts)}


def sweep_point(sweep: LrSweepParams, p: SFTParams, lr: float, seed: int, model: PreTrainedModel,
                tok: PreTrainedTokenizerBase, items: str, kept: str, chains: str) -> dict | None:
    """A short SFT at `lr` on the sweep's seeded subset (the same at every rate); dev readout metrics.

    None on a non-zero rank (rank 0 measures and writes)."""
    examples, _, dev = load_training_data(p, tok, items, kept, chains)
    make_random(seed, "lr_sweep").shuffle(examples)
    subset = examples[: sweep.max_examples]
    with tempfile.TemporaryDirectory(prefix="lr_sweep.") as work, \
            TrainingProgress("lr_sweep", f"lr {lr:g}", enabled=is_main(), shown=LIVE_SHOWN) as progress:
        peft_model, _, parts = train_joint(model, tok, subset, p, lr, seed, work, max_steps=sweep.max_steps,
                                           progress=progress)
    if peft_model is None:
        return None
    dev_metrics = dev_readout_metrics(peft_model, tok, dev)
    return {"lr": lr, "dev": dev_metrics, "steps": sweep.max_steps, "examples": len(subset),
            "final": parts[-1] if parts else None}
