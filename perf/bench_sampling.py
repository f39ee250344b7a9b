"""Nucleus sampling cost: transformers' TopPLogitsWarper (full sort) vs TemperatureTopP (top-k first).

Generates the same chains both ways from a tiny model the script builds (or
`--model DIR`), interleaved, best of N, and prints the ratio and whether the
sampled tokens are identical (same seed, same kept set => same tokens).
Usage: python perf/bench_sampling.py [--model models/base] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import torch
from transformers import LogitsProcessorList

from decision_pipeline.lm.readout import pad_left
from decision_pipeline.lm.sampling import TemperatureTopP


def _tiny_model():
    from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model
    spec = TinyModelSpec(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512, max_positions=256)
    return build_tiny_model(spec, vocab_size=4096, pad_token_id=0, eos_token_id=2, seed=0)


def run(model, prompts, ours: bool, temperature: float, top_p: float, new_tokens: int) -> tuple[float, list]:
    ids, mask = pad_left(prompts, 0)
    torch.manual_seed(1)
    kwargs = (dict(temperature=1.0, top_p=1.0, logits_processor=LogitsProcessorList([TemperatureTopP(temperature, top_p)]))
              if ours else dict(temperature=temperature, top_p=top_p))
    started = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                         do_sample=True, top_k=0, pad_token_id=0, **kwargs)
    return time.perf_counter() - started, out.tolist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=96)
    args = ap.parse_args()
    torch.set_num_threads(2)
    if args.model:
        from decision_pipeline.lm.model import load_model
        model = load_model(args.model)
    else:
        model = _tiny_model()
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, model.config.vocab_size, (20,), generator=gen).tolist() for _ in range(args.batch)]
    times = {"transformers": [], "ours": []}
    outputs = {}
    for _ in range(args.repeats):
        for name in ("transformers", "ours"):
            seconds, out = run(model, prompts, name == "ours", 0.7, 0.95, args.new_tokens)
            times[name].append(seconds)
            outputs[name] = out
    best = {k: min(v) for k, v in times.items()}
    print(f"{args.batch} prompts x {args.new_tokens} tokens, best of {args.repeats}: "
          f"transformers top-p {best['transformers']:.2f}s, TemperatureTopP {best['ours']:.2f}s, "
          f"ratio {best['transformers'] / best['ours']:.2f}x; same tokens: {outputs['transformers'] == outputs['ours']}")


if __name__ == "__main__":
    main()
