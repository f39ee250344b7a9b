"""What SFT and GRPO share when they hand a model to TRL: the trainer defaults and the LoRA config.

Why one place: both trainers wrote the same optimizer, logging and device settings and the same
LoraConfig by hand; a change made to one (say the Adam beta, or turning TRL's console logging off)
silently left the other behind.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

# Adam beta2 0.95 and clipping at 1.0 as the research trained; no weight decay on the LoRA factors;
# TRL/transformers print nothing of their own (the stages log a progress bar, one summary line and
# the loss logs), and data loading stays in the training process (deterministic order).
TRAINER_DEFAULTS: dict[str, Any] = {
    "adam_beta2": 0.95, "max_grad_norm": 1.0, "weight_decay": 0.0, "report_to": "none", "disable_tqdm": True,
    "dataloader_num_workers": 0, "ddp_find_unused_parameters": False, "save_total_limit": 2,
}


def trainer_defaults(seed: int, gradient_checkpointing: bool, bf16_on_cpu: bool = False) -> dict[str, Any]:
    """The shared TrainingArguments of a run: defaults, seeds, device, precision, checkpointing."""
    cuda = torch.cuda.is_available()
    return {**TRAINER_DEFAULTS, "seed": seed, "data_seed": seed, "use_cpu": not cuda, "bf16": cuda or bf16_on_cpu,
            "gradient_checkpointing": gradient_checkpointing,
            "gradient_checkpointing_kwargs": {"use_reentrant": False} if gradient_checkpointing else None}


def lora_config(r: int, alpha: int, targets: Sequence[str], **extra: Any):
    """The adapter both trainers train: no dropout, no bias, a causal-LM task (plus `extra`, e.g. SFT's
    trainable token rows)."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0, bias="none",
                      task_type="CAUSAL_LM", **extra)


def quiet(trainer: Any) -> Any:
    """Drop transformers' PrinterCallback: its dict-per-step prints filled stage logs with numbers the
    loss logs already hold."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer
