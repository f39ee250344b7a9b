"""The params of the SFT job's stages, and the learning-rate rule: `select_chains` (SelectChainsParams),
`lr_sweep` and `choose_lr` (LrSweepParams, `lr_rule`, `choose_lr`) and `sft` (SFTParams).

Free of torch, transformers and TRL, so checking params (`make check`, the report, `--help`) imports
none of them (#34) and `choose_lr` starts in a blink; the code modules import these classes from here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_json
from decision_pipeline.common.params import rule
from decision_pipeline.lm.params import LaunchParams


@dataclass
class LoopParams:
    """params.yaml `select_chains.loop`: what counts as a degenerate loop (see `chains.detect_loop`)."""
    min_repeats: int = rule(min=2, doc="back-to-back repeats of one segment in the tail that make a loop")
    window: int = rule(min=8, doc="words at the end of the thinking block that are examined")
    ngram: int = rule(min=1, doc="n-gram size of the distinct-n-gram test")
    min_distinct: float = rule(min=0.0, max=1.0, doc="a tail with fewer distinct n-grams than this share loops")


@dataclass
class SelectChainsParams:
    """params.yaml `select_chains`: filters and the per-question selection rule."""
    strategy: str = rule(choices=("shortest", "random", "all"),
                         doc="which correct kept chain(s) per question train SFT")
    loop: LoopParams = rule(doc="loop detector settings")
    lookup_patterns: list[str] = rule(doc="regexes of invented look-ups; empty = the built-in list")
    quirks: list[str] = rule(doc="strings stripped from inside the thinking block (model quirks)")


# `sft` keys the short runs do not read: the sweep sets its own rate and step count, and the
# lr source and seed offset only matter to the final run. Every other `sft` key must be in
# lr_sweep's dvc.yaml params (tests/pipeline/test_stage_params.py), or a change to it leaves
# the sweep's results stale.
SFT_KEYS_THE_SWEEP_IGNORES = frozenset({"lr_source", "lr", "max_steps", "seed_offset"})


@dataclass
class LrSweepParams:
    """params.yaml `lr_sweep`: short SFT runs that choose the learning rate."""
    lrs: list[float] = rule(gt=0.0, nonempty=True, doc="learning rates tried (one lr_sweep@<lr> stage each)")
    max_steps: int = rule(min=1, doc="steps of each short run")
    max_examples: int = rule(min=1, doc="training examples of each short run (the same seeded subset)")


def lr_rule(results: dict[float, float]) -> float:
    """The learning rate with the lowest dev NLL; ties (to 1e-6) go to the lower rate."""
    best = min(round(v, 6) for v in results.values())
    return min(lr for lr, v in results.items() if round(v, 6) == best)


def sweep_file(sweep_dir: str, lr: float) -> str:
    """Where lr_sweep@<lr> writes its metrics (one name, used by both stages' dvc.yaml entries)."""
    return f"{sweep_dir}/{lr:g}.json"


def sweep_nll(path: str) -> float:
    """The dev NLL a sweep file records; a missing key or a non-finite value names the file (a NaN
    would otherwise make `lr_rule` pick nothing)."""
    data = read_json(path)
    nll = data.get("dev", {}).get("nll") if isinstance(data, dict) and isinstance(data.get("dev"), dict) else None
    if isinstance(nll, bool) or not isinstance(nll, (int, float)) or not math.isfinite(nll):
        raise PipelineError(f"{path}: dev.nll is {nll!r}, not a finite number; rerun that lr_sweep stage")
    return float(nll)


def choose_lr(lrs: list[float], sweep_dir: str) -> dict:
    """Read each rate's dev NLL and apply `lr_rule`; a missing sweep file names the rate to rerun."""
    results = {}
    for lr in lrs:
        path = sweep_file(sweep_dir, lr)
        if not Path(path).is_file():
            raise PipelineError(f"{path}: missing; run `dvc repro lr_sweep@{lr:g}`")
        results[lr] = sweep_nll(path)
    chosen = lr_rule(results)
    return {"chosen_lr": chosen, "rule": "lowest dev NLL, ties to the lower rate",
            "dev_nll": {f"{lr:g}": v for lr, v in sorted(results.items())}}


TARGET_MODES = ("vote_mix", "gold_only", "gold_onehot")


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
    loss_chunk_tokens: int = rule(run_control=True, min=1, doc="positions of each row whose logits the joint loss "
                                  "builds at once (1 to max_length): the LM head runs chunk by chunk and backward "
                                  "recomputes each chunk, so a micro-batch holds micro_batch_size x this many "
                                  "positions' logits instead of x its length (the largest term of a 152k "
                                  "vocabulary's training step); max_length = one chunk, no recomputation")
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
        if self.loss_chunk_tokens > self.max_length:
            raise PipelineError(f"params.yaml: sft.loss_chunk_tokens ({self.loss_chunk_tokens}) is larger than "
                                f"sft.max_length ({self.max_length}), the longest row; set it between 1 and "
                                "sft.max_length (max_length = one chunk)")
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
