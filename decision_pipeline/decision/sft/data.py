"""Joint SFT of the decision model: reasoner chains + soft-target readout, one LoRA adapter.

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

`JointSFTTrainer` is TRL's `SFTTrainer` with that loss; both parts are logged
separately so the loss curves show which one moves.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase
from trl import SFTTrainer

from decision_pipeline.lm.launch import CpuProcessesResume
from decision_pipeline.decision.prompts import chat_prefix, encode, label_ids, readout_prefix
from decision_pipeline.questions.schema import LABELS, gold_index, target_vector
from decision_pipeline.decision.params import TARGET_MODES  # the SFTParams choices

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


def _chain_sums(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of weighted next-token NLL, sum of weights) of a batch.

    fp32 logits (CPU) are used as they are; lower-precision logits (bf16 on a GPU) are cast to fp32
    only at the positions that carry loss, so no fp32 copy of `[batch, length, vocabulary]` is made
    for padding (a 152k vocabulary: 0.6 MB per position).
    """
    ids, weights = batch["input_ids"], batch["loss_weights"]
    w = weights[:, 1:]
    if logits.dtype != torch.float32:
        keep = w > 0
        token_nll = F.cross_entropy(logits[:, :-1][keep].float(), ids[:, 1:][keep], reduction="none")
        return (token_nll * w[keep]).sum(), w.sum()
    token_nll = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                reduction="none").view(ids.shape[0], -1)
    return (token_nll * w).sum(), w.sum()


def _readout_rows(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Soft-target cross-entropy of each readout row (None when the batch has no readout example)."""
    rows = torch.nonzero(batch["readout_pos"] >= 0).flatten()
    if len(rows) == 0:
        return None
    pos = batch["readout_pos"][rows]
    label_ids, target = batch["readout_label_ids"][rows], batch["readout_target"][rows]
    last = logits[rows, pos]                                  # [r, vocab]
    valid = label_ids >= 0
    picked = last.gather(1, label_ids.clamp(min=0)).float().masked_fill(~valid, float("-inf"))
    logp = torch.log_softmax(picked, dim=-1).masked_fill(~valid, 0.0)
    return -(target * logp).sum(-1)


def joint_losses(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(weighted next-token loss, soft-target readout loss); either is 0 when the batch has none."""
    nll_sum, weight_sum = _chain_sums(logits, batch)
    chain = nll_sum / weight_sum.clamp(min=1e-8)
    readout = _readout_rows(logits, batch)
    return chain, (logits.new_zeros((), dtype=torch.float32) if readout is None else readout.mean())


def global_joint_losses(logits: torch.Tensor, batch: dict[str, torch.Tensor],
                        world: int) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """This process's share of the global-batch losses, and the global losses for the log.

    Why: DDP averages gradients over processes, so a per-process mean weights a short
    half-batch like a long one and the run drifts from the single-process one. Each
    share is `world x (this process's sum) / (global count)`: averaged by DDP, the
    gradient is exactly that of `joint_losses` on the whole batch. One all-reduce of
    four numbers gives the counts and the logged values.
    """
    import torch.distributed as dist

    nll_sum, weight_sum = _chain_sums(logits, batch)
    rows = _readout_rows(logits, batch)
    readout_sum = logits.new_zeros((), dtype=torch.float32) if rows is None else rows.sum()
    n_rows = 0.0 if rows is None else float(len(rows))
    totals = torch.stack([nll_sum.detach(), weight_sum.detach().float(), readout_sum.detach(),
                          logits.new_tensor(n_rows, dtype=torch.float32)])
    dist.all_reduce(totals)
    chain_total, weight_total, readout_total, rows_total = totals.tolist()
    chain = nll_sum * world / max(weight_total, 1e-8)
    readout = readout_sum * world / rows_total if rows_total else logits.new_zeros((), dtype=torch.float32)
    return chain, readout, chain_total / max(weight_total, 1e-8), readout_total / rows_total if rows_total else 0.0


class LengthAwareBatchSampler:
    """Seeded shuffled batches in which every example longer than `long_tokens` trains alone.

    Why: a 32K-token chain batched with others multiplies activation memory by
    the batch size; one per forward pass keeps long chains trainable. The order
    is reshuffled each epoch from (seed, epoch), so runs are reproducible.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, long_tokens: int, seed: int):
        self.lengths, self.batch_size, self.long_tokens, self.seed = list(lengths), batch_size, long_tokens, seed
        self.epoch = 0

    def batches(self, epoch: int) -> list[list[int]]:
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.lengths)).tolist()
        long = [[i] for i in order if self.lengths[i] > self.long_tokens]
        short = [i for i in order if self.lengths[i] <= self.long_tokens]
        grouped = [short[k:k + self.batch_size] for k in range(0, len(short), self.batch_size)] + long
        return [grouped[i] for i in np.random.default_rng([self.seed, epoch, 1]).permutation(len(grouped))]

    def __iter__(self):
        batches = self.batches(self.epoch)
        self.epoch += 1
        return iter(batches)

    def __len__(self) -> int:
        n_long = sum(n > self.long_tokens for n in self.lengths)
        return n_long + -(-(len(self.lengths) - n_long) // self.batch_size)


class JointSFTTrainer(SFTTrainer, CpuProcessesResume):
    """SFTTrainer whose loss is chain LM loss + `readout_weight` × soft-target readout loss."""

    def __init__(self, *args: Any, readout_weight: float = 1.0, long_chain_tokens: int = 0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.readout_weight = readout_weight
        self.long_chain_tokens = long_chain_tokens
        self.part_log: list[dict] = []

    def get_train_dataloader(self):
        """The default loader, or with `long_chain_tokens` > 0 one whose long chains train alone."""
        if not self.long_chain_tokens:
            return super().get_train_dataloader()
        from torch.utils.data import DataLoader
        sampler = LengthAwareBatchSampler([len(x) for x in self.train_dataset["input_ids"]],
                                          self.args.per_device_train_batch_size, self.long_chain_tokens, self.args.seed)
        return self.accelerator.prepare(DataLoader(self.train_dataset, batch_sampler=sampler,
                                                   collate_fn=self.data_collator))

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The step's micro-batches; under gradient accumulation also the step's loss denominators.

        Why: averaging per-micro-batch means weights a micro-batch of short chains like one of long
        ones, so micro 4 x accumulation 2 would train differently from batch 8. With the step's total
        loss weight and readout rows known up front, each micro-batch contributes its sums over those
        totals and the accumulated gradient equals the whole batch's.
        """
        samples, num_items = super().get_batch_samples(epoch_iterator, num_batches, device)
        if self.args.gradient_accumulation_steps > 1:
            totals = torch.zeros(2, dtype=torch.float64)
            for b in samples:
                totals += torch.tensor([float(b["loss_weights"][:, 1:].sum()), float((b["readout_pos"] >= 0).sum())],
                                       dtype=torch.float64)
            if self.accelerator.num_processes > 1:
                import torch.distributed as dist
                totals = totals.to(self.accelerator.device)
                dist.all_reduce(totals)
            self._window = [float(x) for x in totals.tolist()]
            self._window_sums = [0.0, 0.0, 0]
        return samples, num_items

    def _accumulated_losses(self, logits: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """This micro-batch's share of the step losses (scaled for the trainer's division by the
        accumulation steps and DDP's average over processes); logs the step once its last share is in."""
        world, steps = self.accelerator.num_processes, self.current_gradient_accumulation_steps
        weight_total, rows_total = self._window
        nll_sum, _ = _chain_sums(logits, inputs)
        rows = _readout_rows(logits, inputs)
        readout_sum = logits.new_zeros((), dtype=torch.float32) if rows is None else rows.sum()
        scale = world * steps
        chain = nll_sum * scale / max(weight_total, 1e-8)
        readout = readout_sum * scale / rows_total if rows_total else logits.new_zeros((), dtype=torch.float32)
        sums = self._window_sums
        sums[0] += float(nll_sum.detach())
        sums[1] += float(readout_sum.detach())
        sums[2] += 1
        if sums[2] == steps:
            done = torch.tensor(sums[:2], dtype=torch.float64)
            if world > 1:
                import torch.distributed as dist
                done = done.to(self.accelerator.device)
                dist.all_reduce(done)
            nll_total, readout_total = done.tolist()
            self.part_log.append({"step": self.state.global_step + 1,
                                  "chain_loss": round(nll_total / max(weight_total, 1e-8), 5),
                                  "readout_loss": round(readout_total / rows_total if rows_total else 0.0, 5)})
        return chain, readout

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], use_cache=False)
        world = self.accelerator.num_processes
        if model.training and self.args.gradient_accumulation_steps > 1:
            chain, readout = self._accumulated_losses(outputs.logits, inputs)
            loss = chain + self.readout_weight * readout
            return (loss, outputs) if return_outputs else loss
        if world > 1:
            chain, readout, chain_log, readout_log = global_joint_losses(outputs.logits, inputs, world)
        else:
            chain, readout = joint_losses(outputs.logits, inputs)
            chain_log, readout_log = float(chain.detach()), float(readout.detach())
        loss = chain + self.readout_weight * readout
        if model.training:
            self.part_log.append({"step": self.state.global_step + 1, "chain_loss": round(chain_log, 5),
                                  "readout_loss": round(readout_log, 5)})
        return (loss, outputs) if return_outputs else loss
