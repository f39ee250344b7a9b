"""Run the joint LoRA SFT with TRL and measure the readout on held-out questions."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import SFTConfig

from decision_pipeline.decision.answering import readout, readout_summary
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.decision.sft_data import JointCollator, JointSFTTrainer


@dataclass
class SFTSettings:
    lr: float
    max_steps: int
    batch_size: int
    warmup_steps: int
    lora_r: int
    lora_alpha: int
    lora_targets: list[str]
    readout_weight: float
    seed: int
    save_steps: int = 0       # 0 = no intermediate checkpoints
    bf16: bool = False
    train_embeddings: bool = False  # an embedding delta in the adapter (peft trainable tokens)
    long_chain_tokens: int = 0      # examples longer than this train one per forward pass (0 = off)


def train_joint(model: PreTrainedModel, tok: PreTrainedTokenizerBase, examples: Sequence[dict], s: SFTSettings,
                work_dir: str | Path, resume: bool = False) -> tuple[PreTrainedModel, list[dict], list[dict]]:
    """Train one LoRA adapter on the joint examples; returns (peft model, trainer log, loss parts)."""
    columns = ("input_ids", "loss_weights", "readout_pos", "readout_label_ids", "readout_target")
    dataset = Dataset.from_list([{k: ex[k] for k in columns} for ex in examples])
    config = SFTConfig(
        output_dir=str(work_dir), learning_rate=s.lr, max_steps=s.max_steps,
        per_device_train_batch_size=s.batch_size, warmup_steps=s.warmup_steps, lr_scheduler_type="cosine",
        adam_beta2=0.95, max_grad_norm=1.0, weight_decay=0.0, logging_steps=max(1, s.max_steps // 50),
        save_strategy="steps" if s.save_steps else "no", save_steps=s.save_steps or 500, save_total_limit=1,
        seed=s.seed, data_seed=s.seed, use_cpu=not torch.cuda.is_available(), bf16=s.bf16,
        gradient_checkpointing=False, remove_unused_columns=False, report_to="none",
        dataset_kwargs={"skip_prepare_dataset": True}, disable_tqdm=True, dataloader_num_workers=0)
    # A from-scratch tiny model never saw the chat markup in pretraining and keeps much
    # of its task knowledge in the token embeddings, which LoRA's linear adapters
    # cannot change: `train_embeddings` adds a per-token embedding delta to the same
    # adapter (tied to the LM head). Large pretrained bases do not need it.
    tokens = {"embed_tokens": list(range(model.get_input_embeddings().num_embeddings))} if s.train_embeddings else None
    lora = LoraConfig(r=s.lora_r, lora_alpha=s.lora_alpha, target_modules=list(s.lora_targets), lora_dropout=0.0,
                      bias="none", task_type="CAUSAL_LM", trainable_token_indices=tokens)
    trainer = JointSFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tok,
                              data_collator=JointCollator(tok.pad_token_id), peft_config=lora,
                              readout_weight=s.readout_weight, long_chain_tokens=s.long_chain_tokens)
    has_checkpoint = resume and any(Path(work_dir).glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=True if has_checkpoint else None)
    trainer.model.eval()
    return trainer.model, trainer.state.log_history, trainer.part_log


def dev_readout_metrics(model: PreTrainedModel, tok: PreTrainedTokenizerBase, questions: Sequence[dict],
                        batch_size: int = 32) -> dict:
    """Readout accuracy / NLL / ECE (temperature 1) on held-out questions."""
    logits = readout(model, tok, questions, batch_size)
    return readout_summary(logits, questions)


def parse_votes(chains: Sequence[dict], questions_by_id: dict[str, dict]) -> dict[str, list[int | None]]:
    """Parsed answers of every generated chain, per question (the readout target's vote part)."""
    votes: dict[str, list[int | None]] = {}
    for c in chains:
        q = questions_by_id.get(c["question_id"])
        if q is not None:
            votes.setdefault(c["question_id"], []).append(parse_answer(c["text"], len(q["options"])))
    return votes


def lr_rule(results: dict[float, float]) -> float:
    """The learning rate with the lowest dev NLL; ties (to 1e-6) go to the lower rate."""
    best = min(round(v, 6) for v in results.values())
    return min(lr for lr, v in results.items() if round(v, 6) == best)
