"""The device smoke: a model of the profile's base shapes (random weights) through the pipeline's own
readout and the real trainers' steps, peak memory measured beside the memory plan's.

Why the real trainers: a stand-in loss measures a stand-in. On one H200 the old smoke's hand-written
GRPO loss (fp32 `log_softmax`) took 29-90 GiB where TRL's own log-prob path took 18-43, so the plan
was checked against the wrong code. Here every training step is the stage's code:
- SFT: `JointSFTTrainer` (decision/sft/trainer.py) built from the profile's `sft` params by the stage's
  own `sft_config` and `lora_config`, `trainer.train()` on joint examples (a chain with loss weights
  and a readout row with a soft target) of the measured length; its `compute_loss` is the stage's loss;
- GRPO: TRL's `GRPOTrainer` with the stage's `grpo_config` (the profile's loss_type, beta, epsilon,
  checkpointing; vLLM off), `trainer.train()`; only generation is replaced, through TRL's own
  `rollout_func` hook, by random completions of exactly max_completion_length tokens (a 4B model would
  take minutes to write them). Rewards, advantages, the reference pass (beta > 0), TRL's fused LM-head
  log-probs (`add_fused_lm_head`: its Triton kernel where triton imports on CUDA, else torch tiles —
  printed) and `_compute_loss` are TRL's;
- readout: the pipeline's `label_logits` (token-packed, `logits_to_keep=1`).
`--tiny` runs the same code on CPU with a tiny config (the CI test); `--shapes heldout` measures the
held-out rows of the measured table (tests/fixtures/h200_memory.json: configurations the plan was not
fitted on, read from the table itself); `--json` writes every row as soon as it is measured.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.preflight.model_dirs import QWEN3_4B, TINY, build_model, build_tokenizer, read_config
from decision_pipeline.preflight.plan import GIB, PROMPT_TOKENS, grpo_peak, readout_peak, read_shape, sft_peak
from decision_pipeline.preflight.profile import profile_params

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")   # rollout_func: TRL calls it experimental, it is TRL's hook


@dataclass
class Measured:
    """One measured phase: peak allocated GiB (None on CPU), tokens processed, seconds, and the plan."""
    stage: str
    device: str
    peak_gib: float | None
    tokens: int
    seconds: float
    plan_gib: float | None = None
    step_tokens_per_s: float | None = None
    detail: dict = field(default_factory=dict)


def _reset(dev: torch.device) -> None:
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak(dev: torch.device) -> float | None:
    if dev.type != "cuda":
        return None
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / GIB


def logprob_path(dev: torch.device) -> str:
    """Which log-prob code TRL's fused LM head runs on this device (trl.kernels.chunked_logprob._use_triton)."""
    from trl.kernels.chunked_logprob import _use_triton
    return "triton" if _use_triton(dev) else "torch"


def run_readout(model, vocab: int, dev: torch.device, prefix_len: int, batch_tokens: int, n: int,
                stage: str) -> Measured:
    """The pipeline's readout on random prefixes of one length."""
    from decision_pipeline.lm.readout import label_logits
    g = torch.Generator().manual_seed(1)
    prefixes = [torch.randint(10, vocab, (prefix_len,), generator=g).tolist() for _ in range(n)]
    _reset(dev)
    start = time.monotonic()
    with torch.no_grad():
        label_logits(model, prefixes, [[1, 2, 3, 4]] * n, pad_id=0, batch_size=max(1, n), desc=stage,
                     batch_tokens=batch_tokens)
    seconds = time.monotonic() - start
    return Measured(stage, dev.type, _peak(dev), n * prefix_len, seconds, step_tokens_per_s=n * prefix_len / seconds,
                    detail={"prefix_tokens": prefix_len, "rows": n, "batch_tokens": batch_tokens})


class _StepTimer:
    """A TrainerCallback (built lazily: transformers imported once) timing each optimizer step."""

    @staticmethod
    def make(dev: torch.device):
        from transformers import TrainerCallback

        class StepTimer(TrainerCallback):
            def __init__(self):
                self.seconds: list[float] = []
                self._t = 0.0

            def on_step_begin(self, args, state, control, **kwargs):
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                self._t = time.monotonic()

            def on_step_end(self, args, state, control, **kwargs):
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                self.seconds.append(time.monotonic() - self._t)
        return StepTimer()


def _free(trainer) -> object:
    """The base model back without the adapter, and the trainer's optimizer and buffers released."""
    base = trainer.model.unload() if hasattr(trainer.model, "unload") else trainer.model
    trainer.accelerator.free_memory()
    del trainer
    gc.collect()
    return base


def _rank(section: dict, lora_r: int | None) -> dict:
    """LoRA rank `lora_r` with the section's alpha-to-rank ratio (the section's own when None)."""
    if lora_r is None:
        return {}
    return {"lora_r": lora_r, "lora_alpha": max(1, round(lora_r * int(section["lora_alpha"]) / int(section["lora_r"])))}


def run_sft(model, tok, params: dict, dev: torch.device, rows: int, length: int, steps: int,
            accumulation: int = 1, lora_r: int | None = None, chunk: int | None = None) -> tuple[Measured, object]:
    """`steps` optimizer steps of the stage's JointSFTTrainer on joint examples of `length` tokens, `rows`
    per forward (accumulation micro-batches per step); `lora_r` and `chunk` (sft.loss_chunk_tokens) replace
    the profile's."""
    from datasets import Dataset

    from decision_pipeline.common.params import from_dict
    from decision_pipeline.lm.finetune import lora_config, quiet
    from decision_pipeline.decision.prompts import label_ids
    from decision_pipeline.decision.sft.config import SFTParams
    from decision_pipeline.decision.sft.data import MAX_LABELS, JointCollator
    from decision_pipeline.decision.sft.trainer import JointSFTTrainer, sft_config

    raw = dict(params["sft"], micro_batch_size=rows, batch_size=rows * accumulation, save_steps=0,
               train_embeddings=False, warmup_steps=0, max_steps=steps, **_rank(params["sft"], lora_r))
    if chunk is not None:
        raw["loss_chunk_tokens"] = chunk
    s = from_dict(SFTParams, raw, "sft")
    g = torch.Generator().manual_seed(2)
    prompt = min(PROMPT_TOKENS, length // 2)
    labels = label_ids(tok, 4)
    example = {"input_ids": torch.randint(10, len(tok), (length,), generator=g).tolist(),
               "loss_weights": [s.prompt_loss_weight] * prompt + [1.0] * (length - prompt),
               "readout_pos": prompt - 1, "readout_label_ids": labels + [-1] * (MAX_LABELS - len(labels)),
               "readout_target": [0.7, 0.1, 0.1, 0.1] + [0.0] * (MAX_LABELS - 4)}
    data = Dataset.from_list([example] * (rows * accumulation * steps))
    timer = _StepTimer.make(dev)
    with tempfile.TemporaryDirectory(prefix="smoke-sft-") as work:
        trainer = quiet(JointSFTTrainer(model=model, args=sft_config(s, 1e-5, 0, work, steps), train_dataset=data,
                                  processing_class=tok, data_collator=JointCollator(tok.pad_token_id),
                                  peft_config=lora_config(s.lora_r, s.lora_alpha, s.lora_targets),
                                  readout_weight=s.readout_weight, long_chain_tokens=s.long_chain_tokens,
                                  loss_chunk_tokens=s.loss_chunk_tokens, callbacks=[timer]))
        _reset(dev)
        start = time.monotonic()
        trainer.train()
        seconds, peak = time.monotonic() - start, _peak(dev)
        base = _free(trainer)
    per_step = rows * accumulation * length
    measured = Measured("sft", dev.type, peak, steps * per_step, seconds,
                        step_tokens_per_s=per_step / timer.seconds[-1],
                        detail={"rows": rows, "length": length, "accumulation": accumulation, "loss": "joint",
                                "chunk": min(s.loss_chunk_tokens, length),
                                "step_seconds": [round(x, 3) for x in timer.seconds],
                                "gradient_checkpointing": s.gradient_checkpointing, "lora_r": s.lora_r})
    return measured, base


def run_grpo(model, tok, params: dict, dev: torch.device, micro: int, prompt_len: int, completion: int,
             steps: int, lora_r: int | None = None) -> tuple[Measured, object]:
    """`steps` optimizer steps of TRL's GRPOTrainer (the stage's config, vLLM off) on random completions of
    exactly `completion` tokens after `prompt_len`-token prompts, `micro` completions per forward."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from decision_pipeline.common.params import from_dict
    from decision_pipeline.lm.finetune import lora_config, quiet
    from decision_pipeline.decision.rl.config import RLParams
    from decision_pipeline.decision.rl.trainer import grpo_config

    spg = 2   # optimizer steps per generation round: step 2 is a pure update (no rollout in it)
    raw = dict(params["rl"], micro_batch_size=micro, num_generations=2, prompts_per_round=micro,
               steps_per_generation=spg, max_steps=spg * max(1, -(-steps // spg)), save_steps=1000 * spg,
               max_completion_length=completion, use_vllm=False, warmup_steps=0, rewards={"smoke": 1.0},
               **_rank(params["rl"], lora_r))
    p = from_dict(RLParams, raw, "rl")
    g = torch.Generator().manual_seed(3)
    special = set(tok.all_special_ids) | {tok.eos_token_id, tok.pad_token_id}

    def rollout(prompts: list, trainer) -> dict:   # TRL's hook: what a sampler would return, no decoding
        def draw(n: int) -> list[int]:
            ids = torch.randint(10, len(tok), (n,), generator=g).tolist()
            return [t if t not in special else 10 for t in ids]
        return {"prompt_ids": [draw(prompt_len) for _ in prompts],
                "completion_ids": [draw(completion) for _ in prompts], "logprobs": None}

    def reward(completions, **kwargs) -> list[float]:
        return [float(i % 2) for i in range(len(completions))]

    timer = _StepTimer.make(dev)
    with tempfile.TemporaryDirectory(prefix="smoke-grpo-") as work:
        trainer = quiet(GRPOTrainer(model=model, reward_funcs=[reward], args=grpo_config(p, 0, work),
                              train_dataset=Dataset.from_list([{"prompt": "x"}] * (p.prompts_per_round * p.rounds)),
                              processing_class=tok, peft_config=lora_config(p.lora_r, p.lora_alpha, p.lora_targets),
                              rollout_func=rollout, callbacks=[timer]))
        _reset(dev)
        start = time.monotonic()
        trainer.train()
        seconds, peak = time.monotonic() - start, _peak(dev)
        base = _free(trainer)
    per_step = micro * (prompt_len + completion)
    measured = Measured("grpo", dev.type, peak, p.max_steps * per_step, seconds,
                        step_tokens_per_s=per_step / timer.seconds[-1],
                        detail={"micro": micro, "prompt": prompt_len, "completion": completion,
                                "loss_type": p.loss_type, "beta": p.beta, "logprob_path": logprob_path(dev),
                                "step_seconds": [round(x, 3) for x in timer.seconds],
                                "gradient_checkpointing": p.gradient_checkpointing, "lora_r": p.lora_r})
    return measured, base


def plan_for(m: Measured, shape, params: dict) -> float | None:
    """The plan's allocator peak (GiB, no CUDA overhead: max_memory_allocated excludes it) for a measured row."""
    d = m.detail
    if m.stage in ("readout", "post-chain readout"):
        plan = readout_peak(shape, d["prefix_tokens"], d["rows"], d["batch_tokens"])
    elif m.stage == "sft":
        s = params["sft"]
        plan = sft_peak(shape, d["rows"], d["length"], d["lora_r"], list(s["lora_targets"]),
                        d["gradient_checkpointing"], loss="joint", accumulation=d["accumulation"], chunk=d["chunk"])
    elif m.stage == "grpo":
        r = params["rl"]
        plan = grpo_peak(shape, d["micro"], d["prompt"], d["completion"], d["lora_r"], list(r["lora_targets"]),
                         d["gradient_checkpointing"], loss="trl_fused_lm_head", triton=d["logprob_path"] == "triton")
    else:
        return None
    return plan.allocated_gib


def smoke(tiny: bool, steps: int, shapes: str = "profile", profile: str = "gpu", json_out: Path | None = None,
          only: tuple[str, ...] = ("readout", "sft", "grpo"), model_config: Path = QWEN3_4B) -> list[Measured]:
    """Run every phase; each row is appended to `json_out` as soon as it is measured (a killed run keeps them)."""
    params = profile_params(profile, ROOT)
    cuda = torch.cuda.is_available() and not tiny
    dev = torch.device("cuda" if cuda else "cpu")
    config = read_config(model_config, TINY if tiny else None)
    shape = read_shape_dict(config)
    tok = build_tokenizer()
    model = build_model({**config, "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id, "bos_token_id": None},
                        dev, torch.bfloat16 if cuda else torch.float32)
    vocab = len(tok)
    rows: list[Measured] = []

    def keep(m: Measured) -> None:
        m.plan_gib = plan_for(m, shape, params)
        rows.append(m)
        if json_out is not None:
            json_out.write_text(json.dumps({"device": _device_name(dev), "torch": torch.__version__,
                                            "rows": [asdict(r) for r in rows]}, indent=1))

    for kind, *args in shape_plan(params, tiny, shapes):
        if kind not in only and not (kind == "post-chain readout" and "readout" in only):
            continue
        if kind in ("readout", "post-chain readout"):
            keep(run_readout(model, vocab, dev, *args, kind))
        elif kind == "sft":
            m, model = run_sft(model, tok, params, dev, *args[:2], steps, *args[2:])
            keep(m)
        else:
            m, model = run_grpo(model, tok, params, dev, *args[:3], steps, *args[3:])
            keep(m)
    return rows


def shape_plan(params: dict, tiny: bool, shapes: str) -> list[tuple]:
    """The phases to measure, in order: (readout | post-chain readout, prefix, batch tokens, rows),
    (sft, rows, length, accumulation, lora_r, chunk) and (grpo, micro, prompt, completion, lora_r)."""
    r = params["rl"]
    if tiny:   # chunks of 32 positions: the chunked loss runs under the real trainer on CPU
        return [("readout", 32, 256, 64), ("post-chain readout", 32 + 96, 256, 2), ("sft", 2, 96, 2, None, 32),
                ("grpo", 2, 32, 64, None)]
    if shapes == "heldout":
        from decision_pipeline.preflight.measured import H200, load
        out = []
        for row in load(H200)["memory"]:
            if row.get("set") != "held_out":
                continue
            if row["stage"] == "sft":
                out.append(("sft", row["rows"], row["length"], 1, row.get("lora_r"), row.get("chunk")))
            elif row["stage"] == "grpo":
                out.append(("grpo", row["micro"], row["prompt"], row["completion"], row.get("lora_r")))
            else:
                out.append((row["stage"], row["prefix_tokens"], row["batch_tokens"], row["rows"]))
        return out
    sft_rows, sft_len = sft_shape(params)
    budget = int(params.get("runtime", {}).get("readout_batch_tokens", 8192))
    post = PROMPT_TOKENS + int(params["evaluate"]["answering"]["max_new_tokens"])
    return [("readout", PROMPT_TOKENS, budget, 64), ("post-chain readout", post, budget, 2),
            ("sft", sft_rows, sft_len, 1, None, None),
            ("grpo", int(r.get("micro_batch_size", 0)) or 2, PROMPT_TOKENS, int(r["max_completion_length"]), None)]


def read_shape_dict(config: dict):
    """ModelShape of an in-memory config (the tiny CPU variant)."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text(json.dumps(config))
        return read_shape(d)


def sft_shape(params: dict) -> tuple[int, int]:
    """(rows, padded length) of the SFT forward the plan sizes: the longest single example, or a micro-batch
    of long_chain_tokens examples."""
    s = params["sft"]
    micro = int(s.get("micro_batch_size", 0)) or int(s["batch_size"])
    long_chain, max_len = int(s.get("long_chain_tokens", 0)), int(s["max_length"])
    if 0 < long_chain < max_len:
        return (1, max_len) if max_len >= micro * long_chain else (micro, long_chain)
    return micro, max_len


def _device_name(dev: torch.device) -> str:
    return torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu (tiny config)"


def render(rows: list[Measured]) -> list[str]:
    """The printed table: stage, shape, measured peak beside the plan's, step tokens/s."""
    lines = [f"{'stage':<20} {'shape':<18} {'measured GiB':>12} {'plan GiB':>9} {'tok/s':>9}  path"]
    for m in rows:
        d = m.detail
        shape = (f"{d['rows']}x{d['length']}" if m.stage == "sft" else
                 f"{d['micro']}x({d['prompt']}+{d['completion']})" if m.stage == "grpo" else
                 f"{d['rows']}x{d['prefix_tokens']}")
        path = (f"{d['loss_type']} beta {d['beta']}, log-probs {d['logprob_path']}" if m.stage == "grpo" else
                "JointSFTTrainer.compute_loss" if m.stage == "sft" else "label_logits")
        meas = f"{m.peak_gib:.1f}" if m.peak_gib is not None else "n/a (cpu)"
        pred = f"{m.plan_gib:.1f}" if m.plan_gib is not None else "-"
        lines.append(f"{m.stage:<20} {shape:<18} {meas:>12} {pred:>9} {m.step_tokens_per_s or 0:>9.0f}  {path}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m decision_pipeline smoke", description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="CPU, tiny config (CI)")
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps per SFT/GRPO shape (the last is timed)")
    ap.add_argument("--shapes", choices=("profile", "heldout"), default="profile",
                    help="profile: the profile's sizes; heldout: the measured table's held-out rows "
                         "(tests/fixtures/h200_memory.json)")
    ap.add_argument("--only", default="readout,sft,grpo", help="comma list of phases")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here as they are measured")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--model-config", type=Path, default=QWEN3_4B, help="config.json whose shapes to build")
    args = ap.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        print(f"gpu smoke: torch {torch.__version__} sees no GPU; run `make gpu-install`, or pass --tiny for the "
              "CPU check", file=sys.stderr)
        return 2
    try:
        rows = smoke(args.tiny, args.steps, args.shapes, args.profile, args.json, tuple(args.only.split(",")),
                     args.model_config)
    except PipelineError as exc:
        print(f"gpu smoke: {exc}", file=sys.stderr)
        return 2
    dev = "cpu (tiny config)" if args.tiny else torch.cuda.get_device_name(0)
    print(f"device smoke on {dev}, torch {torch.__version__}; plan = allocator peak (max_memory_allocated), "
          "the card also needs the CUDA context")
    for line in render(rows):
        print(line, flush=True)
    return 0

