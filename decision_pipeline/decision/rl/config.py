"""The params of the RL stages: the probe (`rl_probe`), the question selection (`rl_select`) and GRPO
(`rl`, with its reward numbers `rl.reward`).

Kept apart from the probing and training code so that checking params (`make check`, the report,
`--help`) imports neither torch, transformers nor TRL (#34); the code modules import these classes
from here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import RayParams, ray_cluster, replica_engine
from decision_pipeline.lm.params import BACKENDS, LaunchParams

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
# balanced: options re-permuted so gold positions are uniform within every option count (run.balance_gold_positions)
GOLD_POSITION_MODES = ("balanced", "as_selected")


@dataclass
class ProbeRayParams(RayParams):
    """The cluster `rl_probe` samples on; the fields of generate/generation.py's GenerateRayParams (that module
    imports torch, this one must not), so generate/ray_generation.py takes either."""
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
class RlSelectParams:
    """params.yaml `rl_select`: eligibility, the readout screen and the fresh-question mix."""
    min_correct: int = rule(min=0, doc="fewest probe chains (of rl_probe.k) that must be right")
    max_correct: int = rule(min=0, doc="most probe chains that may be right; below rl_probe.k")
    gold_prob_min: float = rule(min=0.0, max=1.0, doc="lowest calibrated readout probability of the gold option")
    gold_prob_max: float = rule(min=0.0, max=1.0, doc="highest calibrated readout probability of the gold option")
    fresh_fraction: float = rule(min=0.0, max=1.0, doc="share of fresh (rl split) questions among those kept")

    def __post_init__(self) -> None:
        if self.min_correct > self.max_correct:
            raise PipelineError(f"params.yaml: rl_select.min_correct ({self.min_correct}) exceeds "
                                f"max_correct ({self.max_correct})")
        if self.gold_prob_min > self.gold_prob_max:
            raise PipelineError(f"params.yaml: rl_select.gold_prob_min ({self.gold_prob_min}) exceeds "
                                f"gold_prob_max ({self.gold_prob_max})")


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
    rewards: dict[str, float] = rule(doc="reward name -> weight (registry in decision/rl/rewards.py)")
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
