"""The joint SFT's examples (reasoner chains + soft-target readout) and the collator that batches them.

Two kinds of examples share one dataset and one forward pass per batch:

- reasoner: `user → <think> chain </think> Answer: X` with LM loss on the
  assistant turn (and `prompt_loss_weight` on the question: tiny models learn
  content through the question text, see NOTES);
- readout: `user → Answer:` whose loss is the cross-entropy between a soft
  target and the softmax over the option-label logits at the answer position.
  The target is `sft.target_mode`: `vote_mix` (the research's rule, the
  default) = `alpha·gold + (1−alpha)·votes`, the share of the model's own
  parsed chains per option mixed with the gold; `gold_only` = the gold alone
  (the item's own target: one-hot, soft where the item is soft); `gold_onehot`
  = one-hot at the gold option for every item. The last two are the SFT
  gold-only ablation (scripts/sft_ablation.py).

The loss itself and the trainer that computes it are in trainer.py.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from decision_pipeline.decision.prompts import chat_prefix, encode, label_ids, readout_prefix
from decision_pipeline.questions.schema import LABELS, gold_index, target_vector
from decision_pipeline.decision.sft.config import TARGET_MODES  # the SFTParams choices

MAX_LABELS = len(LABELS)


def gold_target(q: dict) -> np.ndarray:
    """The item's own target as an array in option order (see `questions.target_vector`)."""
    return np.array(target_vector(q))


def is_soft(target: Sequence[float]) -> bool:
    """A target with more than one option above zero."""
    return sum(1 for p in target if p > 1e-9) > 1


def readout_target(q: dict, votes: Sequence[int | None], alpha: float, mode: str = "vote_mix") -> list[float]:
    """The readout target of `q` under `mode` (TARGET_MODES; the default is the research's rule).

    vote_mix: alpha·gold + (1−alpha)·vote share of the model's own parsed chains; with no parsed
    vote, the gold alone. `gold` is the item's target (`gold_target`), so soft items stay soft.
    gold_only: the gold alone, votes ignored. gold_onehot: 1 at the gold option, 0 elsewhere.
    """
    n = len(q["options"])
    if mode == "gold_onehot":
        return [float(i == gold_index(q)) for i in range(n)]
    if mode not in TARGET_MODES:
        raise ValueError(f"readout target mode {mode!r} is not one of {', '.join(TARGET_MODES)}")
    gold = gold_target(q)
    counts = Counter(v for v in votes if v is not None and 0 <= v < n)
    if mode == "gold_only" or not counts:
        return gold.tolist()
    vote = np.array([counts.get(i, 0) for i in range(n)], dtype=float) / sum(counts.values())
    return (alpha * gold + (1 - alpha) * vote).tolist()


def reasoner_example(tok: PreTrainedTokenizerBase, q: dict, chain_text: str, prompt_loss_weight: float,
                     max_length: int) -> dict | None:
    """Token ids and per-token loss weights of one chain example (None if over max_length)."""
    prompt = encode(tok, chat_prefix(tok, q))
    completion = encode(tok, chain_text.rstrip() + tok.eos_token)
    ids = prompt + completion
    if len(ids) > max_length:
        return None
    weights = [prompt_loss_weight] * len(prompt) + [1.0] * len(completion)
    return {"input_ids": ids, "loss_weights": weights, "readout_pos": -1,
            "readout_label_ids": [-1] * MAX_LABELS, "readout_target": [0.0] * MAX_LABELS, "kind": "chain"}


def readout_example(tok: PreTrainedTokenizerBase, q: dict, target: Sequence[float],
                    prompt_loss_weight: float) -> dict:
    """The readout prompt ending in `Answer:`; its loss is the soft target at the last position."""
    ids = readout_prefix(tok, q)
    labels = label_ids(tok, len(q["options"]))
    pad = MAX_LABELS - len(labels)
    return {"input_ids": ids, "loss_weights": [prompt_loss_weight] * len(ids), "readout_pos": len(ids) - 1,
            "readout_label_ids": labels + [-1] * pad, "readout_target": list(target) + [0.0] * pad,
            "kind": "readout"}


def build_joint_examples(tok: PreTrainedTokenizerBase, questions: Sequence[dict], kept: Sequence[dict],
                         votes: dict[str, list[int | None]], alpha: float, prompt_loss_weight: float,
                         max_length: int, readout_copies: int = 1,
                         target_mode: str = "vote_mix") -> tuple[list[dict], int]:
    """Readout examples for every question (`readout_copies` each, targets by `target_mode`) and one per
    kept chain.

    Returns the examples (chains first, then readouts, in question-id order) and
    how many chains were dropped for exceeding `max_length`. Each readout example
    carries `target_soft` (its final target has mass on more than one option),
    `gold_soft` (the item's own target is soft) and `voted` (its target carries a
    model vote: only under vote_mix) so the stage can count them.
    """
    by_id = {q["id"]: q for q in questions}
    examples, too_long = [], 0
    for chain in sorted(kept, key=lambda c: c["id"]):
        ex = reasoner_example(tok, by_id[chain["question_id"]], chain["text"], prompt_loss_weight, max_length)
        if ex is None:
            too_long += 1
        else:
            examples.append(ex)
    for q in sorted(questions, key=lambda q: q["id"]):
        target = readout_target(q, votes.get(q["id"], []), alpha, target_mode)
        example = readout_example(tok, q, target, prompt_loss_weight)
        example.update(target_soft=is_soft(target), gold_soft=is_soft(gold_target(q)),
                       voted=target_mode == "vote_mix" and any(v is not None for v in votes.get(q["id"], [])))
        examples += [example] * readout_copies
    return examples, too_long


class JointCollator:
    """Right-pads a batch; keeps loss weights and readout fields as tensors."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        width = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(features), width), dtype=torch.long)
        weights = torch.zeros((len(features), width), dtype=torch.float32)
        for i, f in enumerate(features):
            n = len(f["input_ids"])
            ids[i, :n] = torch.tensor(f["input_ids"])
            mask[i, :n] = 1
            weights[i, :n] = torch.tensor(f["loss_weights"], dtype=torch.float32)
        return {"input_ids": ids, "attention_mask": mask, "loss_weights": weights,
                "readout_pos": torch.tensor([f["readout_pos"] for f in features]),
                "readout_label_ids": torch.tensor([f["readout_label_ids"] for f in features]),
                "readout_target": torch.tensor([f["readout_target"] for f in features], dtype=torch.float32)}
