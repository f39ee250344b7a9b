"""Expected first-run hours per GPU stage: the plan's token counts over stated throughput assumptions.

Why assumptions, said as such: throughput depends on the card, the kernels and the chains' real
lengths, none known before a run. The numbers below are round figures for a 4B model on one
H100/H200-class GPU; the table prints them so a user can rescale with their own measurement
(scripts/gpu_smoke.sh prints measured tokens/s for readout, SFT and GRPO steps).
"""
from __future__ import annotations

from decision_pipeline.preflight.plan import PROMPT_TOKENS, _get

MEAN_CHAIN_TOKENS = 2000       # assumed mean sampled chain (capped chains are longer, most are shorter)
GEN_TOKENS_PER_S = 20000       # vLLM, batched sampling, one GPU
TRAIN_TOKENS_PER_S = 6000      # LoRA SFT/GRPO update, bf16, gradient checkpointing
HF_GEN_TOKENS_PER_S = 1500     # transformers generate (the hf backend), batched
READOUT_TOKENS_PER_S = 50000   # prefill-only forward passes


def _gen_rate(backend: str) -> int:
    return GEN_TOKENS_PER_S if backend == "vllm" else HF_GEN_TOKENS_PER_S


def stage_tokens(params: dict) -> list[tuple[str, int, int, str]]:
    """(stage, tokens, tokens per second, what is counted) for each GPU-heavy stage of a profile."""
    chain = PROMPT_TOKENS + MEAN_CHAIN_TOKENS
    g = params.get("generate", {})
    ev = params.get("evaluate", {})
    rows = [("generate", int(g.get("max_questions", 0)) * int(g.get("k", 0)) * chain,
             _gen_rate(g.get("backend", "hf")), "questions x k chains")]
    items = int(ev.get("max_items", 0))
    rows.append(("evaluate (readout)", items * PROMPT_TOKENS, READOUT_TOKENS_PER_S, "eval prompts"))
    rows.append(("evaluate (chains)", items * chain, _gen_rate(_get(params, "evaluate.answering.backend", "hf")),
                 "one chain per eval item (x models evaluated)"))
    s = params.get("sft", {})
    example = PROMPT_TOKENS + MEAN_CHAIN_TOKENS
    sweep = params.get("lr_sweep", {})
    if s.get("lr_source") == "sweep":
        rows.append(("lr_sweep", len(sweep.get("lrs", [])) * int(sweep.get("max_steps", 0)) * int(s.get("batch_size", 0))
                     * example, TRAIN_TOKENS_PER_S, "lrs x steps x batch examples"))
    rows.append(("sft", int(s.get("max_steps", 0)) * int(s.get("batch_size", 0)) * example, TRAIN_TOKENS_PER_S,
                 "steps x batch examples"))
    p = params.get("rl_probe", {})
    rows.append(("rl_probe", (int(p.get("fresh_questions", 0)) + int(p.get("sft_questions", 0))) * int(p.get("k", 0))
                 * chain, _gen_rate(p.get("backend", "hf")), "questions x k chains"))
    r = params.get("rl", {})
    rounds = int(r.get("max_steps", 0)) // max(1, int(r.get("steps_per_generation", 1)))
    rl_tokens = rounds * int(r.get("prompts_per_round", 0)) * int(r.get("num_generations", 0)) * chain
    rows.append(("rl (rollouts)", rl_tokens, _gen_rate("vllm" if r.get("use_vllm") else "hf"), "rounds x prompts x group"))
    rows.append(("rl (updates)", rl_tokens, TRAIN_TOKENS_PER_S, "the same tokens, trained once"))
    rows.append(("s1mb", int(_get(params, "s1mb_data.max_cases", 0)) * 40 * chain,
                 _gen_rate(_get(params, "evaluate.answering.backend", "hf")),
                 "cases x ~40 decisions, routed share thinks"))
    return rows


def render_hours(params: dict) -> str:
    """The `hours` table: tokens per stage, the assumed rate, hours; assumptions printed with it."""
    lines = [f"{'stage':<20} {'tokens':>14} {'tok/s':>7} {'hours':>7}  counted"]
    total = 0.0
    for stage, tokens, rate, what in stage_tokens(params):
        hours = tokens / rate / 3600
        total += hours
        lines.append(f"{stage:<20} {tokens:>14,} {rate:>7,} {hours:>7.1f}  {what}")
    lines.append(f"{'total':<20} {'':>14} {'':>7} {total:>7.1f}")
    lines.append(f"assumed: mean chain {MEAN_CHAIN_TOKENS} tokens + prompt {PROMPT_TOKENS}; vLLM {GEN_TOKENS_PER_S} tok/s, "
                 f"hf generate {HF_GEN_TOKENS_PER_S} tok/s, training {TRAIN_TOKENS_PER_S} tok/s, readout "
                 f"{READOUT_TOKENS_PER_S} tok/s on one H100/H200-class GPU (assumptions, not measurements)")
    return "\n".join(lines)
