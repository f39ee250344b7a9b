"""A tiny GRPO run for the RL tests: run as a script it trains with a toy reward and prints the adapter hash.

Why a toy reward: an untrained 1-layer model never closes a chain, so every real reward gives a
group the same value and no gradient; a resume test on a run that never moves would prove nothing.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # run as a script by accelerate too: no `tests` package then
ROUND_PROMPTS, GENERATIONS, STEPS_PER_ROUND = 4, 4, 2


def toy_params(max_steps: int = 6, save_steps: int = 2, num_processes: int = 1):
    """The micro profile's rl with what the toy run depends on: the toy reward, its round shape (4 prompts x 4
    generations, 2 steps a round), a rate and temperature that move the adapter, no vLLM, one thread."""
    import dataclasses

    from decision_pipeline.common.params import from_dict
    from decision_pipeline.common.profiles import merged_profile
    from decision_pipeline.decision.rl.config import RLParams
    micro = from_dict(RLParams, merged_profile("micro", ROOT)["rl"], "micro profile: rl")
    return dataclasses.replace(
        micro, lr=1e-2, max_steps=max_steps, prompts_per_round=ROUND_PROMPTS, num_generations=GENERATIONS,
        steps_per_generation=STEPS_PER_ROUND, temperature=1.0, top_p=1.0, rewards={"low_ids": 1.0}, use_vllm=False,
        save_steps=save_steps, threads=1, launch=dataclasses.replace(micro.launch, num_processes=num_processes))


def low_ids(completion_ids, **_):
    """Toy reward: share of sampled ids below 400 (varies within a group, so GRPO has a gradient)."""
    return [sum(t < 400 for t in ids) / max(len(ids), 1) for ids in completion_ids]


def adapter_digest(model) -> tuple[str, float]:
    """SHA-256 of the LoRA weights and the largest |lora_B| (0 would mean the adapter never moved)."""
    sd = {k: v for k, v in model.state_dict().items() if "lora" in k}
    digest = hashlib.sha256(b"".join(v.detach().cpu().numpy().tobytes() for _, v in sorted(sd.items()))).hexdigest()
    moved = max(float(v.abs().max()) for k, v in sd.items() if "lora_B" in k)
    return digest, moved


def run(model_dir: str, work: str, max_steps: int, live: str | None = None) -> dict | None:
    """Train and describe the adapter; None on a non-zero rank when started by `accelerate launch`.
    `live`: a DVCLive directory for the per-step metrics."""
    import torch

    from decision_pipeline.lm.launch import world_size
    from decision_pipeline.decision.rl.trainer import fingerprint_parts, train_grpo
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.model import load_model

    torch.set_num_threads(1)
    p = toy_params(max_steps, num_processes=world_size())
    questions = json.loads(open(f"{model_dir}/questions.json").read())[: p.prompts_needed]
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    fp = fingerprint_parts(p, 0, questions, "tiny", "code")
    peft_model, _, start = train_grpo(model, tok, questions, p, 0, work, fp, registry={"low_ids": low_ids},
                                      live_dir=live)
    if peft_model is None:
        return None
    digest, moved = adapter_digest(peft_model)
    return {"start": start, "digest": digest, "moved": moved}


if __name__ == "__main__":
    result = run(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
    if result is not None:
        print(json.dumps(result))
