"""GRPO on the SFT model with TRL: config from params, LoRA, rollout log, resumable checkpoints.

Why every knob is explicit: several TRL defaults changed between versions
(`loss_type` is now dapo, `beta` 0, `vllm_importance_sampling_mode`
sequence_mask), so `grpo_config` sets each one from params and a TRL upgrade
cannot silently change the run. The learning rate is constant after a short
warm-up, so any checkpoint is a valid stopping point.

Resume: checkpoints land in a `persist: true` work directory every `save_steps`
(a multiple of `steps_per_generation`, so a checkpoint is always at a round
boundary and TRL regenerates the next round from the restored RNG state). The
work directory is claimed by a fingerprint of params, data, base weights, TRL
version and this code; checkpoints of another run are refused (never resumed)
and the reason is printed.

Several processes (`rl.launch`): the global batch of each step stays
`prompts_per_round x num_generations / steps_per_generation` (each process takes its
share); rank 0 alone claims the work directory, writes the rollout log (every rank's
rows, gathered in rank order, which is TRL's order) and each checkpoint's fingerprint.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.finetune import lora_config, quiet, trainer_defaults
from decision_pipeline.common.workdir import claim, content_params, last_step
from decision_pipeline.common.io import JsonlAppender, read_jsonl, write_jsonl, write_text_atomic
from decision_pipeline.common.log import info
from decision_pipeline.common.progress import LogHistoryCallback, TrainingProgress
from decision_pipeline.lm.launch import (CpuProcessesResume, barrier, consolidated,
                                               gather_objects, is_main, on_main_then_all, world_size)
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.decision.rl.rewards import make_reward_funcs
from decision_pipeline.decision.rl.config import RLParams



def check_lora_targets(model: PreTrainedModel, targets: Sequence[str], model_dir: str) -> None:
    """Every LoRA target must name Linear modules of the model (else the adapter would attach to nothing)."""
    linear = {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    missing = [t for t in targets if t not in linear]
    if missing:
        raise PipelineError(f"{model_dir}: model has no Linear module named {missing[0]!r} for the LoRA adapter "
                            f"(rl.lora_targets); its Linear modules are {', '.join(sorted(linear)) or 'none'}")


def rl_accumulation(p: RLParams, processes: int) -> tuple[int, int]:
    """(completions per forward pass and process, gradient accumulation steps) for one optimizer step."""
    share = p.step_batch // processes
    micro = p.micro_batch_size or share
    return micro, share // micro


def grpo_config(p: RLParams, seed: int, work_dir: str | Path) -> Any:
    """TRL GRPOConfig with every GRPO knob set from params (none left to a version's default).

    TRL's `steps_per_generation` counts micro-batches, ours optimizer steps: with `micro_batch_size`
    each optimizer step is `accumulation` micro-batches, so a round feeds `steps_per_generation x
    accumulation` of them and the generation batch stays `prompts_per_round x num_generations`."""
    from trl import GRPOConfig

    micro, accumulation = rl_accumulation(p, world_size())
    return GRPOConfig(
        output_dir=str(work_dir), learning_rate=p.lr, lr_scheduler_type="constant_with_warmup",
        warmup_steps=p.warmup_steps, max_steps=p.max_steps, num_train_epochs=1,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation, steps_per_generation=p.steps_per_generation * accumulation,
        num_generations=p.num_generations, num_iterations=1, max_completion_length=p.max_completion_length,
        temperature=p.temperature, top_p=p.top_p, top_k=0, loss_type=p.loss_type, beta=p.beta,
        epsilon=p.epsilon, scale_rewards=p.scale_rewards, importance_sampling_level=p.importance_sampling_level,
        vllm_importance_sampling_correction=True, vllm_importance_sampling_mode=p.vllm_importance_sampling_mode,
        vllm_importance_sampling_clip_max=3.0, mask_truncated_completions=p.mask_truncated_completions,
        reward_weights=[float(w) for w in p.rewards.values()], multi_objective_aggregation="sum_then_normalize",
        use_vllm=p.use_vllm, vllm_mode=p.vllm_mode, vllm_gpu_memory_utilization=p.vllm_gpu_memory_utilization,
        vllm_max_model_length=p.vllm_max_model_length or None, vllm_enable_sleep_mode=p.vllm_enable_sleep_mode,
        shuffle_dataset=True, logging_steps=1, save_strategy="steps", save_steps=p.save_steps,
        log_completions=False, **trainer_defaults(seed, p.gradient_checkpointing))


def prompt_rows(tok: PreTrainedTokenizerBase, questions: Sequence[dict]) -> list[dict]:
    """GRPO dataset rows: the thinking prefix as text (TRL tokenizes it to exactly our ids) + reward columns."""
    from decision_pipeline.decision.prompts import chat_prefix
    from decision_pipeline.questions.schema import THINK_OPEN, gold_index, target_vector

    return [{"prompt": chat_prefix(tok, q) + THINK_OPEN + "\n", "question_id": q["id"], "gold_index": gold_index(q),
             "target": target_vector(q), "task": q["task"]} for q in questions]


class RolloutLog:
    """Per-completion record of every round (answer, closed, tokens, each reward), line-atomic JSONL.

    TRL calls the reward functions one after another on the same batch; the last one
    completes a round's rows. On resume, rows of rounds after the checkpoint are cut first,
    so the log of a resumed run equals an uninterrupted run's.
    """

    def __init__(self, path: Path, weights: dict[str, float], patterns: Sequence[str]):
        self.path, self.names, self.weights = path, list(weights), [float(w) for w in weights.values()]
        self.patterns = [re.compile(p, re.IGNORECASE) for p in patterns]
        self.pending: dict[str, list] = {}
        self.appender: JsonlAppender | None = None

    def open(self, resume_step: int) -> None:
        if self.path.is_file():
            rows = [r for r in read_jsonl(self.path) if r["step"] < resume_step]
            write_jsonl(self.path, rows)
        self.appender = JsonlAppender(self.path)

    def close(self) -> None:
        if self.appender is not None:
            self.appender.close()

    def scored(self, name: str, values: list, batch: dict) -> None:
        self.pending[name] = values
        if name != self.names[-1]:
            return
        step = int(batch["trainer_state"].global_step)
        local = [self._row(i, batch) for i in range(len(batch["question_id"]))]
        rows = gather_objects(local)  # every process's completions, in TRL's (rank) order
        self.pending = {}
        if self.appender is None:  # not the writing process
            return
        seen: dict[str, int] = {}
        for row in rows:
            qid = row["question_id"]
            j = seen[qid] = seen.get(qid, -1) + 1
            self.appender.append({"id": f"{step}:{qid}:{j}", "step": step, "sample": j, **row})

    def _row(self, i: int, batch: dict) -> dict:
        """Completion `i` of this process's batch: answer, closed, tokens, each reward, the weighted total."""
        text, closed = batch["completions"][i], batch["closed"][i]
        row = {"question_id": batch["question_id"][i], "n_tokens": len(batch["completion_ids"][i]), "closed": closed,
               "answer": parse_answer(text, len(batch["target"][i])) if closed else None,
               "gold_index": batch["gold_index"][i],
               "markers": sum(len(p.findall(text.split("</think>")[0])) for p in self.patterns) if closed else None,
               "rewards": {n: self.pending[n][i] for n in self.names}}
        row["total"] = round(sum(w * (v or 0.0) for w, v in zip(self.weights, row["rewards"].values())), 6)
        return row


class _SaveFingerprint(TrainerCallback):
    """Writes the run fingerprint into each checkpoint: a checkpoint says which run it belongs to."""

    def __init__(self, work: Path, fingerprint: str):
        self.work, self.fingerprint = work, fingerprint

    def on_save(self, args, state, control, **kwargs):
        barrier()  # every process has written its part (its RNG state) before the checkpoint is marked whole
        if is_main():
            write_text_atomic(self.work / f"checkpoint-{state.global_step}" / "run_fingerprint.txt",
                              self.fingerprint + "\n")
        return control


def claim_rl_work(work: Path, fingerprint: dict) -> int:
    """The step to resume from (0 = fresh): the work directory claimed for this run (common/workdir.py:
    another run's is removed, naming the changed parts), then only checkpoints sealed by this run's
    fingerprint count (a checkpoint killed mid-save has no seal and is removed)."""
    claim(work, fingerprint, "rl")
    digest = json.dumps(fingerprint, sort_keys=True)
    for ckpt in work.glob("checkpoint-*"):
        owner = ckpt / "run_fingerprint.txt"
        if not (owner.is_file() and owner.read_text().strip() == digest_hash(digest)):
            info("rl", f"{ckpt}: no matching run fingerprint (incomplete or foreign checkpoint); removed")
            shutil.rmtree(ckpt)
    return last_step(work, "run_fingerprint.txt")


def digest_hash(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _grpo_trainer_class() -> type:
    """TRL's GRPOTrainer with the multi-process CPU resume fix (`launch.CpuProcessesResume`)."""
    from trl import GRPOTrainer

    return type("ResumableGRPOTrainer", (GRPOTrainer, CpuProcessesResume), {})


# TRL's per-step logs that go to the live metrics: what a rerun reproduces (never `step_time` or the
# trainer's closing runtime and samples/s, which differ per run), plus each reward's mean.
LIVE_KEYS = ("loss", "reward", "reward_std", "frac_reward_zero_std", "completions/mean_length",
             "completions/clipped_ratio", "entropy", "kl", "learning_rate", "grad_norm")
LIVE_SHOWN = ("reward", "loss")  # on the progress line


def live_values(logs: Mapping[str, Any]) -> dict:
    """The deterministic part of one TRL log entry (`LIVE_KEYS` and `rewards/<name>/mean`)."""
    return {k: v for k, v in logs.items()
            if k in LIVE_KEYS or (k.startswith("rewards/") and k.endswith("/mean"))}


def train_grpo(model: PreTrainedModel, tok: PreTrainedTokenizerBase, questions: Sequence[dict], p: RLParams,
               seed: int, work_dir: str | Path, fingerprint: dict,
               registry: dict | None = None, live_dir: str | Path | None = None,
               progress: TrainingProgress | None = None) -> tuple[Any, list[dict], int]:
    """Train the LoRA adapter with GRPO; returns (peft model, trainer log history, resumed-from step).

    The model is None on a non-zero rank (rank 0 writes every output).
    Progress (reward, loss, tokens/s, ETA) goes to the terminal; with `live_dir` every step's
    `live_values` also go to DVCLive files there, a resumed run's earlier steps replayed from the
    checkpoint's log history. `progress` replaces both (a test's clock and stream).

    `registry` replaces the reward registry (tests use toy rewards on an untrained model)."""
    from datasets import Dataset
    from decision_pipeline.questions.schema import THINK_CLOSE

    work = Path(work_dir)
    on_main_then_all(lambda: claim_rl_work(work, fingerprint))
    start = max((int(c.name.split("-")[1]) for c in work.glob("checkpoint-*")), default=0)  # rank 0 kept valid ones
    close_id = tok.convert_tokens_to_ids(THINK_CLOSE)
    log = RolloutLog(work / "rollouts.jsonl", dict(p.rewards), p.decisiveness_patterns)
    funcs, _ = make_reward_funcs(dict(p.rewards), p.reward, close_id, registry=registry, on_scored=log.scored)
    lora = lora_config(p.lora_r, p.lora_alpha, p.lora_targets)
    trainer = _grpo_trainer_class()(model=model, reward_funcs=funcs, args=grpo_config(p, seed, work),
                          train_dataset=Dataset.from_list(prompt_rows(tok, questions)), processing_class=tok,
                          peft_config=lora)
    trainer.add_callback(_SaveFingerprint(work, digest_hash(json.dumps(fingerprint, sort_keys=True))))
    quiet(trainer)  # the stage prints its own summary line and progress bar
    progress = progress or TrainingProgress.open("rl", live_dir, main=is_main(), shown=LIVE_SHOWN)
    trainer.add_callback(LogHistoryCallback(progress, live_values))
    if is_main():
        log.open(start)
    try:
        trainer.train(resume_from_checkpoint=str(work / f"checkpoint-{start}") if start else None)
    finally:
        log.close()
        progress.close()
    return consolidated(trainer, work), trainer.state.log_history, start


def fingerprint_parts(p: RLParams, seed: int, questions: Sequence[dict], base_fp: str, code_fp: str) -> dict:
    """What a resumable RL work directory must match, part by part (named in the refusal message)."""
    import trl

    from decision_pipeline.common.fingerprint import run_fingerprint

    params = content_params(p)  # checkpointing recomputes the same activations; vLLM's knobs only place them
    # the option order is data too: rl.gold_positions re-permutes it, and the prompts show it
    data = [[q["id"], [o["id"] for o in q.get("options", [])]] for q in questions]
    return {"params": run_fingerprint(params, seed), "data": run_fingerprint(data),
            "base": base_fp[:16], "code": code_fp, "trl": trl.__version__}
