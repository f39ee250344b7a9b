"""The device smoke: a Qwen3-4B-shaped model (random bf16 weights) through readout, SFT and GRPO-shaped
update steps at the GPU profile's sizes, measured peak memory printed beside the memory plan's.

Why random weights: memory and speed depend on shapes, not values, so no hub and no weights are
needed; the first thing a user runs on a new GPU machine (scripts/gpu_smoke.sh) tells in minutes
whether the plan's numbers hold on that card. What it runs (said plainly, not TRL's trainers):
- readout and post-chain readout: the pipeline's own `label_logits` (token-packed batches,
  `logits_to_keep=1`, `use_cache=False`) over prompt-length and prompt+chain-length prefixes;
- SFT: LoRA (the profile's r/targets), gradient checkpointing as the profile says, one forward/backward
  of the plan's tokens per forward (micro-batch x padded length, or the longest single example),
  full-vocabulary loss, AdamW; `--steps` optimizer steps of one micro-batch each;
- GRPO: a short hf `generate` rollout (`--rollout-tokens`, for a tokens/s figure), then `--steps`
  policy-gradient updates on micro-batches of prompt + max_completion_length ids with logits kept for
  the completion only (TRL's loss shape with beta 0: no reference model); vLLM is not involved.
`--tiny` runs the same code on CPU with a tiny config (the CI test).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from decision_pipeline.preflight.plan import (CUDA_OVERHEAD_GIB, GIB, PROMPT_TOKENS, ModelShape, memory_plan,
                                              read_shape)
from decision_pipeline.preflight.profile import profile_params

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "qwen3_4b" / "config.json"
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 128, "vocab_size": 512, "max_position_embeddings": 4096,
        "bos_token_id": 1, "eos_token_id": 2}
TINY_SIZES = {"readout_batch_tokens": 256, "max_new_tokens": 96, "sft_tokens": 192, "rl_micro": 2,
              "completion": 64}


@dataclass
class Measured:
    stage: str
    peak_gib: float | None
    tokens: int
    seconds: float


def _reset(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak(dev: torch.device) -> float | None:
    if dev.type != "cuda":
        return None
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / GIB


def build_model(config: dict, dev: torch.device, dtype: torch.dtype):
    """A randomly initialised causal LM from a config dict (no weights read, nothing fetched)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model(**{k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")})
    torch.manual_seed(0)
    with torch.device(dev):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval()


def sizes_from_profile(params: dict, tiny: bool) -> dict:
    """Batch and length settings of the profile (tiny: small stand-ins with the same structure)."""
    if tiny:
        return dict(TINY_SIZES)
    s, r = params["sft"], params["rl"]
    micro = int(s.get("micro_batch_size", 0)) or int(s["batch_size"])
    long_chain, max_len = int(s.get("long_chain_tokens", 0)), int(s["max_length"])
    sft_rows, sft_len = (1, max_len) if 0 < long_chain < max_len and max_len >= micro * long_chain else \
        (micro, long_chain if 0 < long_chain < max_len else max_len)
    step = int(r["prompts_per_round"]) * int(r["num_generations"]) // int(r["steps_per_generation"])
    return {"readout_batch_tokens": int(params.get("runtime", {}).get("readout_batch_tokens", 8192)),
            "max_new_tokens": int(params["evaluate"]["answering"]["max_new_tokens"]),
            "sft_rows": sft_rows, "sft_len": sft_len, "rl_micro": int(r.get("micro_batch_size", 0)) or step,
            "completion": int(r["max_completion_length"])}


def run_readout(model, vocab: int, dev: torch.device, prefix_len: int, batch_tokens: int, n: int,
                stage: str) -> Measured:
    """The pipeline's readout on random prefixes of one length."""
    from decision_pipeline.lm.readout import label_logits
    g = torch.Generator().manual_seed(1)
    prefixes = [torch.randint(10, vocab, (prefix_len,), generator=g).tolist() for _ in range(n)]
    labels = [[1, 2, 3, 4]] * n
    _reset(dev)
    start = time.monotonic()
    with torch.no_grad():
        label_logits(model, prefixes, labels, pad_id=0, batch_size=max(1, n), desc=stage, batch_tokens=batch_tokens)
    return Measured(stage, _peak(dev), n * prefix_len, time.monotonic() - start)


def _lora(model, params: dict, section: str, checkpointing: bool):
    from peft import LoraConfig, get_peft_model
    p = params[section]
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    peft = get_peft_model(model, LoraConfig(r=int(p["lora_r"]), lora_alpha=int(p["lora_alpha"]),
                                            target_modules=list(p["lora_targets"]), lora_dropout=0.0))
    opt = torch.optim.AdamW([q for q in peft.parameters() if q.requires_grad], lr=1e-5)
    return peft, opt


def run_sft(model, params: dict, vocab: int, dev: torch.device, rows: int, length: int, steps: int) -> Measured:
    """LoRA SFT steps at the plan's tokens per forward (full-vocabulary LM loss)."""
    peft, opt = _lora(model, params, "sft", bool(params["sft"].get("gradient_checkpointing", False)))
    ids = torch.randint(10, vocab, (rows, length), device=dev)
    _reset(dev)
    start = time.monotonic()
    for _ in range(steps):
        loss = peft(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    out = Measured("sft", _peak(dev), steps * rows * length, time.monotonic() - start)
    peft.unload()
    return out


def run_grpo(model, params: dict, vocab: int, dev: torch.device, micro: int, completion: int, steps: int,
             rollout_tokens: int) -> tuple[Measured, Measured]:
    """A short hf rollout (tokens/s), then policy-gradient updates with completion-only logits."""
    peft, opt = _lora(model, params, "rl", bool(params["rl"].get("gradient_checkpointing", False)))
    prompt = torch.randint(10, vocab, (micro, PROMPT_TOKENS if dev.type == "cuda" else 32), device=dev)
    _reset(dev)
    start = time.monotonic()
    with torch.no_grad():
        peft.eval()
        peft.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=rollout_tokens,
                      min_new_tokens=rollout_tokens, do_sample=True, pad_token_id=0)
        peft.train()
    rollout = Measured("grpo rollout (hf)", _peak(dev), micro * rollout_tokens, time.monotonic() - start)
    ids = torch.cat([prompt, torch.randint(10, vocab, (micro, completion), device=dev)], dim=1)
    advantages = torch.linspace(-1.0, 1.0, micro, device=dev)
    _reset(dev)
    start = time.monotonic()
    for _ in range(steps):
        logits = peft(input_ids=ids, use_cache=False, logits_to_keep=completion + 1).logits[:, :-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, -completion:, None]).squeeze(-1)
        loss = -(advantages[:, None] * torch.exp(logp - logp.detach())).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del logits, logp, loss
    update = Measured("grpo", _peak(dev), steps * ids.numel(), time.monotonic() - start)
    peft.unload()
    return rollout, update


def predicted(params: dict, shape: ModelShape, gpu_gib: float, sizes: dict) -> dict[str, float]:
    """The plan's peak per stage without the vLLM share (the smoke runs no vLLM) and with the overhead."""
    out = {}
    for p in memory_plan(params, shape, gpu_gib):
        out[p.stage] = sum(v for k, v in p.terms.items() if not k.startswith("vllm share")) / GIB + CUDA_OVERHEAD_GIB
    return out


def smoke(tiny: bool, steps: int, rollout_tokens: int, profile: str = "gpu") -> list[str]:
    """Run every phase; return the printed lines (stage, measured peak, predicted peak, tokens/s)."""
    params = profile_params(profile, ROOT)
    cuda = torch.cuda.is_available() and not tiny
    dev = torch.device("cuda" if cuda else "cpu")
    config = dict(json.loads(FIXTURE.read_text()), **(TINY if tiny else {}))
    sizes = sizes_from_profile(params, tiny)
    if tiny:   # shrink the profile to the stand-in sizes so the plan predicts the same shapes
        params["sft"].update(micro_batch_size=sizes["rl_micro"], max_length=sizes["sft_tokens"] // 2,
                             long_chain_tokens=0, lora_r=4)
        params["rl"].update(micro_batch_size=sizes["rl_micro"], max_completion_length=sizes["completion"], lora_r=4)
        sizes.update(sft_rows=2, sft_len=sizes["sft_tokens"] // 2)
    model = build_model(config, dev, torch.bfloat16 if cuda else torch.float32)
    shape = read_shape(FIXTURE) if not tiny else ModelShape(
        hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=512, tied=True,
        max_positions=4096)
    vocab = config["vocab_size"]
    gpu_gib = torch.cuda.get_device_properties(0).total_memory / GIB if cuda else 80.0
    runs = [run_readout(model, vocab, dev, PROMPT_TOKENS if cuda else 32, sizes["readout_batch_tokens"], 64,
                        "readout"),
            run_readout(model, vocab, dev, (PROMPT_TOKENS if cuda else 32) + sizes["max_new_tokens"],
                        sizes["readout_batch_tokens"], 2, "post-chain readout"),
            run_sft(model, params, vocab, dev, sizes["sft_rows"], sizes["sft_len"], steps)]
    runs += run_grpo(model, params, vocab, dev, sizes["rl_micro"], sizes["completion"], steps, rollout_tokens)
    plan = predicted(params, shape, gpu_gib, sizes)
    lines = [f"device smoke on {torch.cuda.get_device_name(0) if cuda else 'cpu (tiny config)'}, torch "
             f"{torch.__version__}, {gpu_gib:.0f} GiB; plan shown without vLLM's share (no vLLM here)",
             f"{'stage':<20} {'measured GiB':>12} {'plan GiB':>9} {'tokens':>10} {'tok/s':>9}"]
    for m in runs:
        meas = f"{m.peak_gib:.1f}" if m.peak_gib is not None else "n/a (cpu)"
        pred = f"{plan[m.stage]:.1f}" if m.stage in plan else "-"
        lines.append(f"{m.stage:<20} {meas:>12} {pred:>9} {m.tokens:>10} {m.tokens / max(m.seconds, 1e-9):>9.0f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m decision_pipeline.preflight.smoke", description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="CPU, tiny config (CI)")
    ap.add_argument("--steps", type=int, default=4, help="SFT and GRPO optimizer steps")
    ap.add_argument("--rollout-tokens", type=int, default=128, help="new tokens of the hf rollout (speed only)")
    ap.add_argument("--profile", default="gpu")
    args = ap.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        print(f"gpu smoke: torch {torch.__version__} sees no GPU; run `make gpu-install`, or pass --tiny for the "
              "CPU check", file=sys.stderr)
        return 2
    for line in smoke(args.tiny, args.steps, args.rollout_tokens, args.profile):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
