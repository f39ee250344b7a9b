"""bf16 autocast vs fp32 for the default pretraining model on this CPU: one training step each.

Why: `pretrain.bf16` was on by default, and on a CPU without native bf16 (AVX-512 BF16 / AMX;
`torch.backends.cpu.get_cpu_capability()` says AVX2 here) autocast emulates it and a step is
several times slower than fp32. The default profile now trains in fp32; the GPU profile keeps bf16.

    python perf/bench_autocast.py [--repeats 5] [--threads 2]

Builds the default profile's GPT-2 shape (params.yaml pretrain.model, the tokenizer's vocabulary
size from metrics/tokenizer.json), times forward + backward of one batch (pretrain.batch_size x
seq_len) alternately in both modes, prints median seconds per step and the ratio.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import yaml
from transformers import GPT2Config, GPT2LMHeadModel

ROOT = Path(__file__).resolve().parents[1]


def step_seconds(model: torch.nn.Module, batch: torch.Tensor, bf16: bool) -> float:
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(batch, labels=batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())["pretrain"]
    vocab = json.loads((ROOT / "metrics/tokenizer.json").read_text())["vocab_size"]
    m = p["model"]
    model = GPT2LMHeadModel(GPT2Config(n_embd=m["hidden_size"], n_layer=m["num_layers"], n_head=m["num_heads"],
                                       n_inner=m["intermediate_size"], n_positions=m["max_positions"],
                                       vocab_size=vocab, bos_token_id=0, eos_token_id=0))
    batch = torch.randint(0, vocab, (p["batch_size"], p["seq_len"]), generator=torch.Generator().manual_seed(0))
    step_seconds(model, batch, False), step_seconds(model, batch, True)      # warm-up
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for bf16 in (False, True):
            times[bf16].append(step_seconds(model, batch, bf16))
    fp32, bf16 = statistics.median(times[False]), statistics.median(times[True])
    print(f"cpu capability {torch.backends.cpu.get_cpu_capability()}, {args.threads} threads, "
          f"batch {tuple(batch.shape)}, vocab {vocab}")
    print(f"fp32 {fp32:.3f} s/step, bf16 autocast {bf16:.3f} s/step: bf16/fp32 = {bf16 / fp32:.2f}x")


if __name__ == "__main__":
    main()
