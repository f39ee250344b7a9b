"""Stage `evaluate@{model}`: readout, thinking and post-chain answers on the eval split.

Readout: option-label probabilities after `Answer:` (one forward pass).
Thinking: one sampled chain per question through the configured backend,
answer parsed from it; post-chain readout from the chain's exact token ids.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import torch

from stages.common.hashing import stable_subset
from stages.common.io import write_json, write_jsonl
from stages.common.log import stage_main, summary
from stages.common.params import load_base, load_section, rule
from stages.decision.evaluate import accuracy_by_group, readout, readout_summary, thinking, thinking_summary
from stages.decision.questions import gold_index, load_items
from stages.lm.backends import BACKENDS, SamplingSettings, make_backend
from stages.lm.model import load_model
from stages.lm.tokenizer import load_tokenizer


@dataclass
class EvaluateParams:
    backend: str = rule(choices=BACKENDS)
    max_items: int = rule(min=1)
    batch_size: int = rule(min=1)
    max_new_tokens: int = rule(min=1)
    temperature: float = rule(min=0.0)
    top_p: float = rule(min=0.0, max=1.0)
    ece_bins: int = rule(min=2)
    threads: int = rule(min=1, default=2)


def build_backend(name: str, model, tok, model_dir: str, batch_size: int):
    if name == "hf":
        return make_backend("hf", model=model, tokenizer=tok, batch_size=batch_size)
    if name == "vllm":
        return make_backend("vllm", model_path=model_dir)
    return make_backend(name)


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model", help="model name: models/<name> is evaluated")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--items", default="data/items/items.parquet")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(EvaluateParams, "evaluate", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    model_dir = f"models/{args.model}"
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    questions = stable_subset(load_items(args.items, split="eval"), p.max_items, "evaluate")

    logits = readout(model, tok, questions, p.batch_size)
    backend = build_backend(p.backend, model, tok, model_dir, p.batch_size)
    settings = SamplingSettings(max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
                                seed=seed, stop_token_ids=(tok.eos_token_id,))
    chains = thinking(backend, model, tok, questions, settings, p.batch_size)

    gold = [gold_index(q) for q in questions]
    readout_pred = [int(np.argmax(lg)) for lg in logits]
    records = [{"id": q["id"], "family": q["family"], "level": q["level"], "task": q["task"], "gold": g,
                "readout_logits": [round(float(x), 5) for x in lg], "readout_pred": rp,
                "thinking_pred": c["thinking_pred"], "chain_tokens": c["chain_tokens"],
                "finish_reason": c["finish_reason"], "chain": c["text"],
                "post_logits": None if c["post_logits"] is None else [round(float(x), 5) for x in c["post_logits"]]}
               for q, g, lg, rp, c in zip(questions, gold, logits, readout_pred, chains)]
    by_group = accuracy_by_group(questions, [r == g for r, g in zip(readout_pred, gold)])
    metrics = {"n_items": len(questions), "readout": readout_summary(logits, questions, n_bins=p.ece_bins),
               "thinking": thinking_summary(chains, questions),
               "readout_by_family": {f: round(float(np.mean([rp == g for q, rp, g in zip(questions, readout_pred, gold)
                                                            if q["family"] == f])), 6)
                                     for f in sorted({q["family"] for q in questions})}}
    write_jsonl(f"data/evaluate/{args.model}/records.jsonl", records)
    write_json(f"plots/evaluate/{args.model}/accuracy_by_group.json", by_group)
    write_json(f"metrics/evaluate/{args.model}.json", metrics)
    summary(f"evaluate@{args.model}", started, n=len(questions), readout_acc=metrics["readout"]["accuracy"],
            thinking_acc=metrics["thinking"]["accuracy"], parse_rate=metrics["thinking"]["parse_rate"])


if __name__ == "__main__":
    raise SystemExit(main())
