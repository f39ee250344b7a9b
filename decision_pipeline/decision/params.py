"""The params sections of the decision model's stages (base model, answering, calibration, evaluation,
SFT, RL probe and GRPO).

Kept apart from the training and answering code so that checking params (`make check`, the report,
`--help`) imports neither torch, transformers nor TRL (#34); each code module re-exports its class.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import RayParams, ray_cluster, replica_engine
from decision_pipeline.lm.params import BACKENDS, LaunchParams

OFFSET_MODES = ("fitted", "tested", "off")
TARGET_MODES = ("vote_mix", "gold_only", "gold_onehot")
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
# balanced: options re-permuted so gold positions are uniform within every option count (rl_run.balance_gold_positions)
GOLD_POSITION_MODES = ("balanced", "as_selected")


@dataclass
class AnsweringParams:
    """params.yaml `evaluate.answering`: how a model answers (calibrate reads the same keys, so the
    post-chain temperatures are fitted on chains sampled exactly as in evaluation)."""
    backend: str = rule(choices=BACKENDS, doc="engine that samples the thinking chains: hf or vllm")
    batch_size: int = rule(min=1, doc="questions per forward batch")
    max_new_tokens: int = rule(min=1, doc="token cap of a thinking chain")
    temperature: float = rule(min=0.0, doc="chain sampling temperature (0 = greedy)")
    top_p: float = rule(min=0.0, max=1.0, doc="nucleus sampling mass (1.0 = off)")
    threads: int = rule(min=1, doc="torch CPU threads")



@dataclass
class BaseModelParams:
    """Where the base model comes from and how many questions score it."""
    source: str = rule(choices=("pretrain", "path"), doc="pretrain: the pretrain@curated model; path: `path`")
    nll_items: int = rule(min=1, doc="held-out eval questions used for the gold-trace NLL")
    path: str = rule(external=True, doc="local Hugging Face model directory when source is path (a dep of the stage); "
                         "configs/external/none = none")
    threads: int = rule(min=1, doc="torch CPU threads")
    add_think_tokens: bool = rule(doc="add <think>/</think> as whole added tokens (and grow the embeddings) when the "
                                      "base's tokenizer lacks them as single tokens, e.g. SmolLM2 or Llama")



@dataclass
class CalibrateParams:
    """params.yaml `calibrate`: per-task temperatures on the calibration split."""
    items: int = rule(min=1, doc="calibration questions used (a seed-free SHA-256 subset)")
    alpha: float = rule(min=0.0, max=1.0, doc="level of the likelihood-ratio test a fitted temperature must pass")
    resplits: int = rule(min=0, doc="halvings in the study of that rule on the calibration items (0 = skip)")
    ece_bins: int = rule(min=2, doc="equal-width confidence bins of the ECE")
    yes_offset: str = rule(choices=OFFSET_MODES, doc="the yes/no logit offset evaluation applies: fitted = the "
                           "research's, fitted by NLL on the calibration split after the temperature; tested = kept "
                           "only where its likelihood-ratio test against 0 passes alpha; off = none. A fit at the "
                           "search bound (every yes/no item has one answer) is never applied")
    folds: int = rule(min=2, doc="cross-fitting folds of the hypotheses H1-H4: each calibration item is scored by "
                      "what the other folds fitted, so the tests read no item they were fitted on")
    bootstrap: int = rule(min=10, doc="paired bootstrap resamples behind H1-H4 (CI and p) and the offset's CI")



@dataclass
class EvaluateParams:
    """params.yaml `evaluate`: the eval split, answered by readout and by thinking."""
    answering: AnsweringParams = rule(doc="how the model answers (calibrate reads the same keys)")
    max_items: int = rule(min=1, doc="eval questions used (a seed-free SHA-256 subset)")
    ece_bins: int = rule(min=2, doc="equal-width confidence bins of the ECE and reliability plot")
    bootstrap: int = rule(min=10, doc="bootstrap resamples behind every confidence interval")



@dataclass
class ProbeRayParams(RayParams):
    """The cluster `rl_probe` samples on; the fields of generation.GenerateRayParams (that module imports
    torch, this one must not), so decision.ray_generation takes either."""
    cpus_per_worker: int = rule(run_control=True, min=1, default=1,
                                doc="CPUs Ray reserves for each probe replica on a CPU cluster (on a GPU cluster "
                                    "each replica takes one GPU)")


@dataclass
class RlProbeParams:
    """params.yaml `rl_probe`: which questions are probed and how many chains each."""
    k: int = rule(min=2, doc="chains per candidate question (eligibility is 1..k-1 correct)")
    fresh_questions: int = rule(min=0, doc="candidates from the rl split (never trained on), SHA-256 subset")
    sft_questions: int = rule(min=0, doc="candidates from the SFT pool questions, SHA-256 subset")
    backend: str = rule(choices=BACKENDS, doc="engine that samples the probe chains: hf or vllm")
    batch_size: int = rule(min=1, doc="prompts per forward batch")
    chunk: int = rule(min=1, doc="questions per resumable unit of the log")
    threads: int = rule(min=1, doc="torch CPU threads of each worker (the same for any number of workers)")
    workers: int = rule(min=1, doc="probe processes (CPU) or GPUs with one engine each; chunk i goes to worker "
                                   "i mod workers and chains.jsonl is the same for any value")
    engine: str = replica_engine()
    ray: ProbeRayParams = ray_cluster(ProbeRayParams)



@dataclass
class RewardParams:
    """params.yaml `rl.reward`: the numbers inside the reward rules."""
    right: float = rule(doc="reward for the gold answer")
    wrong: float = rule(doc="reward for a wrong or unparsable answer after a closed chain")
    defensible: float = rule(doc="reward for a non-gold answer with target mass >= defensible_min (soft questions)")
    defensible_min: float = rule(min=0.0, max=1.0, doc="target mass that makes a non-gold answer defensible")
    unfinished: float = rule(max=0.0, doc="reward for a chain still open (no </think>) at the token cap")
    length_target: int = rule(min=1, doc="completion tokens above which the length penalty starts")
    length_per_token: float = rule(min=0.0, doc="penalty per completion token above length_target")
    length_max_penalty: float = rule(min=0.0, doc="largest length penalty (a positive number, subtracted)")
    format_bonus: float = rule(min=0.0, doc="reward for a completion ending `</think> Answer: X`")



@dataclass
class RLParams:
    """params.yaml `rl`: GRPO (TRL) on the SFT model with a fresh LoRA adapter."""
    lr: float = rule(min=0.0, doc="learning rate, constant after warmup_steps")
    warmup_steps: int = rule(min=0, doc="linear warm-up steps, then constant (any checkpoint is a valid stop)")
    max_steps: int = rule(min=1, doc="optimizer steps; rounds = max_steps / steps_per_generation")
    prompts_per_round: int = rule(min=1, doc="questions per generation round (each used once, never reused)")
    num_generations: int = rule(min=2, doc="chains sampled per question per round (the GRPO group)")
    steps_per_generation: int = rule(min=1, doc="optimizer steps fed by one round (TRL steps_per_generation)")
    loss_type: str = rule(choices=LOSS_TYPES, doc="TRL loss aggregation (set explicitly: the default changed)")
    beta: float = rule(min=0.0, doc="KL coefficient to the SFT model (0 = no reference model)")
    epsilon: float = rule(min=0.0, doc="PPO-style clip range of the importance ratio")
    scale_rewards: str = rule(choices=("group", "batch", "none"), doc="advantage scaling by the reward std")
    importance_sampling_level: str = rule(choices=("token", "sequence"), doc="ratio per token or per sequence")
    vllm_importance_sampling_mode: str = rule(choices=IS_MODES, doc="vLLM/trainer mismatch correction "
                                                                    "(the research used token_truncate)")
    mask_truncated_completions: bool = rule(doc="drop capped chains from the loss (false: the unfinished "
                                                "penalty must reach the model)")
    temperature: float = rule(min=0.0, doc="sampling temperature of the rollouts")
    top_p: float = rule(min=0.0, max=1.0, doc="nucleus mass of the rollouts (1.0 = off)")
    max_completion_length: int = rule(min=1, doc="token cap of a rollout; a chain open at the cap is unfinished")
    lora_r: int = rule(min=1, doc="LoRA rank of the RL adapter")
    lora_alpha: int = rule(min=1, doc="LoRA scaling numerator")
    lora_targets: list[str] = rule(doc="module names that get LoRA adapters")
    rewards: dict[str, float] = rule(doc="reward name -> weight (registry in decision/rl_rewards.py)")
    reward: RewardParams = rule(doc="numbers inside the reward rules")
    decisiveness_patterns: list[str] = rule(doc="regexes counted per finished chain as re-verification markers")
    use_vllm: bool = rule(doc="generate rollouts with vLLM (GPU profile); false = transformers generate")
    vllm_mode: str = rule(choices=("colocate", "server"), doc="vLLM beside the trainer or as a server")
    save_steps: int = rule(run_control=True, min=1, doc="checkpoint every N steps (a multiple of steps_per_generation)")
    seed_offset: int = rule(min=0, doc="training seed = base.seed + offset")
    threads: int = rule(run_control=True, min=1, doc="torch CPU threads (split across the launch's processes)")
    launch: LaunchParams = rule(doc="training processes and the accelerate config that starts them")
    gold_positions: str = rule(choices=GOLD_POSITION_MODES, doc="balanced: each training question's options "
                               "re-permuted so its gold positions are uniform within every option count (always "
                               "answering one letter then earns chance, not reward; one order per question, "
                               "since a GRPO group shares its prompt); as_selected: the items' own option order")
    vllm_gpu_memory_utilization: float = rule(run_control=True, gt=0.0, max=1.0, default=0.3, doc="share of the GPU the "
                                              "colocated vLLM engine takes (the trainer needs the rest)")
    vllm_max_model_length: int = rule(min=0, default=0, doc="vLLM context (prompt + max_completion_length); "
                                      "0 = the model's own (a 262k context needs ~36 GiB of KV cache)")
    vllm_enable_sleep_mode: bool = rule(run_control=True, default=False, doc="vLLM frees its weights and KV cache while the "
                                        "trainer steps (colocate)")
    micro_batch_size: int = rule(min=0, default=0, doc="completions per forward pass and process; the step "
                                 "batch is reached by gradient accumulation (0 = the whole share at once)")
    gradient_checkpointing: bool = rule(run_control=True, default=False, doc="recompute activations in the backward pass "
                                        "(less memory; on for large bases on a GPU)")

    def __post_init__(self) -> None:
        where = "params.yaml: rl"
        if (self.prompts_per_round * self.num_generations) % self.steps_per_generation:
            raise PipelineError(f"{where}: prompts_per_round x num_generations "
                                f"({self.prompts_per_round * self.num_generations}) must be divisible by "
                                f"steps_per_generation ({self.steps_per_generation})")
        if self.max_steps % self.steps_per_generation or self.save_steps % self.steps_per_generation:
            raise PipelineError(f"{where}: max_steps and save_steps must be multiples of steps_per_generation "
                                f"({self.steps_per_generation}) so rounds and checkpoints line up")
        if self.step_batch % self.launch.num_processes:
            raise PipelineError(f"{where}: the step batch prompts_per_round x num_generations / "
                                f"steps_per_generation ({self.step_batch}) must be divisible by "
                                f"launch.num_processes ({self.launch.num_processes})")
        if self.micro_batch_size and self.step_batch % (self.micro_batch_size * self.launch.num_processes):
            raise PipelineError(f"{where}: the step batch ({self.step_batch}) must be a multiple of "
                                f"micro_batch_size x launch.num_processes ({self.micro_batch_size} x "
                                f"{self.launch.num_processes}); change rl.micro_batch_size")
        for pattern in self.decisiveness_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise PipelineError(f"{where}.decisiveness_patterns: {pattern!r} is not a regex ({exc})") from None

    @property
    def step_batch(self) -> int:
        """Completions per optimizer step, over all processes."""
        return self.prompts_per_round * self.num_generations // self.steps_per_generation

    @property
    def rounds(self) -> int:
        return self.max_steps // self.steps_per_generation

    @property
    def prompts_needed(self) -> int:
        return self.rounds * self.prompts_per_round



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
    alpha: float = rule(min=0.0, max=1.0, doc="readout target = alpha * gold + (1 - alpha) * chain votes "
                        "(target_mode vote_mix)")
    target_mode: str = rule(choices=TARGET_MODES, doc="readout targets: vote_mix = the research's alpha mix of "
                            "gold and the model's chain votes; gold_only = the item's gold target alone (soft "
                            "where the item is); gold_onehot = one-hot at the gold (the SFT ablation's modes)")
    readout_weight: float = rule(min=0.0, doc="weight of the readout loss beside the chain (LM) loss")
    readout_copies: int = rule(min=1, doc="readout examples per question (the example mix)")
    prompt_loss_weight: float = rule(min=0.0, max=1.0, doc="LM loss weight on prompt tokens of chain examples")
    max_length: int = rule(min=16, doc="longest example in tokens; longer chains are dropped and counted")
    dev_items: int = rule(min=1, doc="dev questions for the readout check after training")
    train_embeddings: bool = rule(doc="add an embedding delta to the adapter (tiny from-scratch bases)")
    embedding_tokens: str = rule(choices=("all", "seen"), doc="rows of the embedding delta: every vocabulary "
                                 "token, or only the ids in the training examples plus the option labels "
                                 "(6% of the rows; measured 1.06-1.09x faster but +3.9% training loss, "
                                 "so all is the default: docs/performance.md)")
    bf16: bool = rule(doc="bf16 autocast on CPU (a GPU always trains in bf16)")
    long_chain_tokens: int = rule(min=0, doc="examples longer than this train one per forward pass; 0 = off")
    save_steps: int = rule(run_control=True, min=0, doc="checkpoint every N steps for resume; 0 = none")
    seed_offset: int = rule(min=0, doc="training seed = base.seed + offset; data and splits unchanged")
    threads: int = rule(run_control=True, min=1, doc="torch CPU threads (split across the launch's processes)")
    launch: LaunchParams = rule(doc="training processes and the accelerate config that starts them "
                                    "(also used by lr_sweep)")
    micro_batch_size: int = rule(min=0, default=0, doc="examples per forward pass and process; the step's "
                                 "batch is reached by gradient accumulation (0 = the whole share at once)")
    gradient_checkpointing: bool = rule(run_control=True, default=False, doc="recompute activations in the backward pass "
                                        "(less memory, ~30% more compute; on for large bases on a GPU)")

    def __post_init__(self) -> None:
        if self.batch_size % self.launch.num_processes:
            raise PipelineError(f"params.yaml: sft.batch_size ({self.batch_size}) must be divisible by "
                                f"sft.launch.num_processes ({self.launch.num_processes}): the global batch "
                                "is split evenly across the processes")
        if self.micro_batch_size and self.batch_size % (self.micro_batch_size * self.launch.num_processes):
            raise PipelineError(f"params.yaml: sft.batch_size ({self.batch_size}) must be a multiple of "
                                f"sft.micro_batch_size x sft.launch.num_processes "
                                f"({self.micro_batch_size} x {self.launch.num_processes}): the accumulation "
                                "steps are derived exactly; change sft.micro_batch_size")

    def accumulation(self, processes: int) -> tuple[int, int]:
        """(per-device micro batch, gradient accumulation steps) giving exactly `batch_size` examples a step."""
        share = self.batch_size // processes
        micro = self.micro_batch_size or share
        return micro, share // micro
