"""Run the joint LoRA SFT with TRL and measure the readout on held-out questions."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from trl import SFTConfig

from decision_pipeline.common.params import rule
from decision_pipeline.decision.answering import readout, readout_summary
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.decision.sft_data import JointCollator, JointSFTTrainer


@dataclass
class SFTParams:
    """params.yaml `sft`: the joint LoRA SFT run (chains + soft-target readout)."""
    lr_source: str = rule(choices=("sweep", "fixed"), doc="sweep = the choose_lr stage's pick; fixed = `lr`")
    lr: float = rule(gt=0.0, doc="learning rate when lr_source is fixed")
    max_steps: int = rule(min=1, doc="optimizer steps")
    batch_size: int = rule(min=1, doc="examples per step")
    warmup_steps: int = rule(min=0, doc="linear warm-up steps before the cosine schedule")
    lora_r: int = rule(min=1, doc="LoRA rank")
    lora_alpha: int = rule(min=1, doc="LoRA scaling numerator (scale = lora_alpha / lora_r)")
    lora_targets: list[str] = rule(doc="module names that get LoRA adapters")
    alpha: float = rule(min=0.0, max=1.0, doc="readout target = alpha * gold + (1 - alpha) * chain votes")
    readout_weight: float = rule(min=0.0, doc="weight of the readout loss beside the chain (LM) loss")
    readout_copies: int = rule(min=1, doc="readout examples per question (the example mix)")
    prompt_loss_weight: float = rule(min=0.0, max=1.0, doc="LM loss weight on prompt tokens of chain examples")
    max_length: int = rule(min=16, doc="longest example in tokens; longer chains are dropped and counted")
    dev_items: int = rule(min=1, doc="dev questions for the readout check after training")
    train_embeddings: bool = rule(doc="add an embedding delta to the adapter (tiny from-scratch bases)")
    long_chain_tokens: int = rule(min=0, doc="examples longer than this train one per forward pass; 0 = off")
    save_steps: int = rule(min=0, doc="checkpoint every N steps for resume; 0 = none")
    seed_offset: int = rule(min=0, doc="training seed = base.seed + offset; data and splits unchanged")
    threads: int = rule(min=1, doc="torch CPU threads")


def train_joint(model: PreTrainedModel, tok: PreTrainedTokenizerBase, examples: Sequence[dict], s: SFTParams,
                lr: float, seed: int, work_dir: str | Path, max_steps: int | None = None,
                resume: bool = False,
                on_save: Callable[[list[dict]], None] | None = None) -> tuple[PreTrainedModel, list[dict], list[dict]]:
    """Train one LoRA adapter on the joint examples; returns (peft model, trainer log, loss parts).

    `lr` and `seed` are resolved by the caller (sweep pick, seed offset); `max_steps`
    overrides `s.max_steps` for the sweep's short runs. bf16 only on a GPU.
    `on_save(loss parts so far)` runs at every checkpoint, so a killed run keeps its loss log.
    """
    steps = max_steps or s.max_steps
    columns = ("input_ids", "loss_weights", "readout_pos", "readout_label_ids", "readout_target")
    dataset = Dataset.from_list([{k: ex[k] for k in columns} for ex in examples])
    config = SFTConfig(
        output_dir=str(work_dir), learning_rate=lr, max_steps=steps,
        per_device_train_batch_size=s.batch_size, warmup_steps=s.warmup_steps, lr_scheduler_type="cosine",
        adam_beta2=0.95, max_grad_norm=1.0, weight_decay=0.0, logging_steps=max(1, steps // 50),
        save_strategy="steps" if s.save_steps else "no", save_steps=s.save_steps or 500, save_total_limit=1,
        seed=seed, data_seed=seed, use_cpu=not torch.cuda.is_available(), bf16=torch.cuda.is_available(),
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
    if on_save is not None:
        trainer.add_callback(_SaveLossLog(lambda: on_save(list(trainer.part_log))))
    has_checkpoint = resume and any(Path(work_dir).glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=True if has_checkpoint else None)
    trainer.model.eval()
    return trainer.model, trainer.state.log_history, trainer.part_log


class _SaveLossLog(TrainerCallback):
    """Calls `write` after each checkpoint is saved."""

    def __init__(self, write: Callable[[], None]):
        self.write = write

    def on_save(self, args, state, control, **kwargs):
        self.write()
        return control


def dev_readout_metrics(model: PreTrainedModel, tok: PreTrainedTokenizerBase, questions: Sequence[dict],
                        batch_size: int = 32) -> dict:
    """Readout accuracy / NLL / ECE (temperature 1) on held-out questions."""
    logits = readout(model, tok, questions, batch_size)
    return readout_summary(logits, questions)


VOTING_SOURCES = ("base",)  # the model's own chains; a teacher's (the rule-based solver) never votes


def parse_votes(chains: Sequence[dict], questions_by_id: dict[str, dict]) -> dict[str, list[int | None]]:
    """Parsed answers of the model's own generated chains, per question (the readout target's vote part).

    Teacher chains are excluded: the solver's answer is the gold, so counting it
    as a vote would turn the soft target back into one-hot gold."""
    votes: dict[str, list[int | None]] = {}
    for c in chains:
        q = questions_by_id.get(c["question_id"])
        if q is not None and c.get("source") in VOTING_SOURCES:
            votes.setdefault(c["question_id"], []).append(parse_answer(c["text"], len(q["options"])))
    return votes
