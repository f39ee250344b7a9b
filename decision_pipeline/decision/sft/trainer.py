"""Run the joint LoRA SFT with TRL and measure the readout on held-out questions.

`JointSFTTrainer` is TRL's `SFTTrainer` with the joint loss (chain LM loss + soft-target readout
loss on the examples of data.py, computed by loss.py in `sft.loss_chunk_tokens` chunks without full
logits); both parts are logged separately so the loss curves show which one moves.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback, TrainerState
from trl import SFTConfig, SFTTrainer

from decision_pipeline.lm.finetune import lora_config, quiet, trainer_defaults

from decision_pipeline.common.progress import StepRowsCallback, TrainingProgress
from decision_pipeline.decision.evaluate.answering import readout, readout_summary
from decision_pipeline.lm.launch import CpuProcessesResume, consolidated, is_main, world_size
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.decision.prompts import label_ids
from decision_pipeline.decision.sft.config import SFTParams
from decision_pipeline.decision.sft.data import MAX_LABELS, JointCollator
from decision_pipeline.decision.sft.loss import JointSums, global_joint_losses, mean_losses, model_sums


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

    def __init__(self, *args: Any, readout_weight: float = 1.0, long_chain_tokens: int = 0,
                 loss_chunk_tokens: int = 0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.readout_weight = readout_weight
        self.long_chain_tokens = long_chain_tokens
        self.loss_chunk_tokens = loss_chunk_tokens   # 0: one chunk per row (the full logits)
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

    def _accumulated_losses(self, part: JointSums) -> tuple[torch.Tensor, torch.Tensor]:
        """This micro-batch's share of the step losses (scaled for the trainer's division by the
        accumulation steps and DDP's average over processes); logs the step once its last share is in."""
        world, steps = self.accelerator.num_processes, self.current_gradient_accumulation_steps
        weight_total, rows_total = self._window
        nll_sum, _, rows = part
        zero = nll_sum.new_zeros((), dtype=torch.float32)
        readout_sum = zero if rows is None else rows.sum()
        scale = world * steps
        chain = nll_sum * scale / max(weight_total, 1e-8)
        readout = readout_sum * scale / rows_total if rows_total else zero
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
        """The joint loss from the model's last hidden state, the LM head applied `loss_chunk_tokens` positions
        at a time (sft/loss.py): no `[batch, length, vocabulary]` logits are built."""
        sums, outputs = model_sums(model, inputs, self.loss_chunk_tokens)
        world = self.accelerator.num_processes
        if model.training and self.args.gradient_accumulation_steps > 1:
            chain, readout = self._accumulated_losses(sums)
            loss = chain + self.readout_weight * readout
            return (loss, outputs) if return_outputs else loss
        if world > 1:
            chain, readout, chain_log, readout_log = global_joint_losses(sums, world)
        else:
            chain, readout = mean_losses(sums)
            chain_log, readout_log = float(chain.detach()), float(readout.detach())
        loss = chain + self.readout_weight * readout
        if model.training:
            self.part_log.append({"step": self.state.global_step + 1, "chain_loss": round(chain_log, 5),
                                  "readout_loss": round(readout_log, 5)})
        return (loss, outputs) if return_outputs else loss


def embedding_rows(model: PreTrainedModel, tok: PreTrainedTokenizerBase, examples: Sequence[dict],
                   which: str) -> list[int]:
    """Token ids the embedding delta trains: the whole vocabulary, or those the examples use.

    "seen" keeps every row an input token or a readout target can reach through the
    input side, plus all option labels (a label scored by the readout may never occur
    in a prompt). Rows outside it stay at the base's values; with the tied LM head they
    would otherwise only be pushed down by the softmax over the full vocabulary.
    """
    if which == "all":
        return list(range(model.get_input_embeddings().num_embeddings))
    seen = {t for ex in examples for t in ex["input_ids"]}
    seen |= {t for ex in examples for t in ex["readout_label_ids"] if t >= 0}
    return sorted(seen | set(label_ids(tok, MAX_LABELS)))


def sft_config(s: SFTParams, lr: float, seed: int, work_dir: str | Path, steps: int) -> SFTConfig:
    """TRL's config for the joint run: cosine schedule, per-process share of the global batch (in
    `s.micro_batch_size` pieces by exact gradient accumulation), bf16 on a GPU (on CPU only with `s.bf16`),
    gradient checkpointing only when `s.gradient_checkpointing` (TRL's default would turn it on)."""
    micro, accumulation = s.accumulation(world_size())
    return SFTConfig(
        output_dir=str(work_dir), learning_rate=lr, max_steps=steps,
        per_device_train_batch_size=micro, gradient_accumulation_steps=accumulation, warmup_steps=s.warmup_steps,
        lr_scheduler_type="cosine", logging_steps=max(1, steps // 50),
        save_strategy="steps" if s.save_steps else "no", save_steps=s.save_steps or 500,
        remove_unused_columns=False, dataset_kwargs={"skip_prepare_dataset": True},
        **trainer_defaults(seed, s.gradient_checkpointing, bf16_on_cpu=s.bf16))


def train_joint(model: PreTrainedModel, tok: PreTrainedTokenizerBase, examples: Sequence[dict], s: SFTParams,
                lr: float, seed: int, work_dir: str | Path, max_steps: int | None = None,
                resume: bool = False,
                on_save: Callable[[int, list[dict]], None] | None = None,
                callbacks: Sequence[TrainerCallback] = (),
                progress: TrainingProgress | None = None) -> tuple[PreTrainedModel, list[dict], list[dict]]:
    """Train one LoRA adapter on the joint examples; returns (peft model, trainer log, loss parts).

    `lr` and `seed` are resolved by the caller (sweep pick, seed offset); `max_steps`
    overrides `s.max_steps` for the sweep's short runs. bf16 on a GPU, and on CPU when `s.bf16`.
    `on_save(step, loss parts so far)` runs after every checkpoint is saved (on rank 0), so a
    killed run keeps its loss log; `callbacks` join the trainer's (the benchmark's step timer); `progress`
    (default: the terminal only, on rank 0) gets every step's losses and the tokens trained. Under several
    processes `s.batch_size` stays the global batch (each process takes its share); a non-zero
    rank gets None for the model.
    """
    columns = ("input_ids", "loss_weights", "readout_pos", "readout_label_ids", "readout_target")
    dataset = Dataset.from_list([{k: ex[k] for k in columns} for ex in examples])
    config = sft_config(s, lr, seed, work_dir, max_steps or s.max_steps)
    # A from-scratch tiny model never saw the chat markup in pretraining and keeps much
    # of its task knowledge in the token embeddings, which LoRA's linear adapters
    # cannot change: `train_embeddings` adds a per-token embedding delta to the same
    # adapter (tied to the LM head). Large pretrained bases do not need it.
    tokens = {"embed_tokens": embedding_rows(model, tok, examples, s.embedding_tokens)} if s.train_embeddings else None
    lora = lora_config(s.lora_r, s.lora_alpha, s.lora_targets, trainable_token_indices=tokens)
    trainer = quiet(JointSFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tok,
                                    data_collator=JointCollator(tok.pad_token_id), peft_config=lora,
                                    readout_weight=s.readout_weight, long_chain_tokens=s.long_chain_tokens,
                                    loss_chunk_tokens=s.loss_chunk_tokens))
    if on_save is not None and is_main():
        trainer.add_callback(_SaveLossLog(lambda step: on_save(step, list(trainer.part_log))))
    own_progress = progress is None
    progress = progress or TrainingProgress("sft", enabled=is_main(), shown=LIVE_SHOWN)
    # tokens a step trains, estimated as the examples' mean length x the batch (the display's tokens/s)
    tokens_per_step = sum(len(ex["input_ids"]) for ex in examples) / len(examples) * s.batch_size
    trainer.add_callback(StepRowsCallback(progress, trainer.part_log, lambda row: joint_values(row, s.readout_weight),
                                          tokens_per_step))
    for callback in callbacks:
        trainer.add_callback(callback)
    checkpoints = sorted(Path(work_dir).glob("checkpoint-*"), key=lambda c: int(c.name.split("-")[1])) if resume else []
    if checkpoints and int(checkpoints[-1].name.split("-")[1]) >= config.max_steps:
        # The run already ended: resumed there, the trainer runs one more training step before it
        # checks its stop condition (a step 2001 of 2000 in the loss log), so load the final state instead.
        trainer._load_from_checkpoint(str(checkpoints[-1]))
        trainer.state = TrainerState.load_from_json(str(checkpoints[-1] / "trainer_state.json"))
    else:
        try:
            trainer.train(resume_from_checkpoint=True if checkpoints else None)
        finally:
            if own_progress:
                progress.close()
    return consolidated(trainer, work_dir), trainer.state.log_history, trainer.part_log


LIVE_SHOWN = ("loss", "chain_loss", "readout_loss")  # on the progress line


def joint_values(row: dict, readout_weight: float) -> dict:
    """A loss-parts row as live metrics: the joint loss the optimizer minimised and its two parts."""
    return {"loss": round(row["chain_loss"] + readout_weight * row["readout_loss"], 5),
            "chain_loss": row["chain_loss"], "readout_loss": row["readout_loss"]}


class _SaveLossLog(TrainerCallback):
    """Calls `write(step)` after each checkpoint is saved."""

    def __init__(self, write: Callable[[int], None]):
        self.write = write

    def on_save(self, args, state, control, **kwargs):
        self.write(state.global_step)
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
