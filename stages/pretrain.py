"""Stage `pretrain@{curated,random}`: train the small GPT on a selection, measure held-out ppl.

Packs the selection to exactly `curate.budget_tokens`, trains the tiny Qwen2
model with a fixed seed, evaluates loss / perplexity / bits per byte on every
dev register by iterating the whole dev set. For `pretrain.noise_selection`
it also retrains on `noise_reorderings` re-orderings of the same documents:
the spread is the noise floor any curated-vs-random gap must beat.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.io import atomic_dir, read_json, read_table, write_json
from decision_pipeline.common.log import info, stage_main, summary
from decision_pipeline.common.params import load_base, load_section, read_params_file, rule
from decision_pipeline.lm.model import TinyModelSpec, build_tiny_model, count_params
from decision_pipeline.lm.training import TrainSettings, heldout_nll, pack_tokens, perplexity_report, train_on_tokens
from decision_pipeline.lm.bpe import load_tokenizer


@dataclass
class PretrainParams:
    model: TinyModelSpec
    seq_len: int = rule(min=16)
    batch_size: int = rule(min=1)
    lr: float = rule(min=0.0)
    warmup_steps: int = rule(min=0)
    epochs: int = rule(min=1)
    bf16: bool = True
    threads: int = rule(min=1, default=2)
    noise_selection: str = "curated"  # the selection whose re-orderings measure the noise floor
    noise_reorderings: int = rule(min=0, default=2)


def train_and_eval(docs_ids, dev_by_register, tok, p: PretrainParams, budget: int, seed: int, desc: str):
    """One run: pack, train, evaluate; returns (model, loss log, held-out report)."""
    tokens = pack_tokens(docs_ids, tok.eos_token_id, budget)
    model = build_tiny_model(p.model, len(tok), tok.pad_token_id, tok.eos_token_id, seed)
    settings = TrainSettings(p.seq_len, p.batch_size, p.lr, p.warmup_steps, p.epochs, bf16=p.bf16, seed=seed)
    log = train_on_tokens(model, tokens, settings, desc=desc)
    report, total_nll, total_tok, total_bytes = {"registers": {}}, 0.0, 0, 0
    for register, (ids, n_bytes) in sorted(dev_by_register.items()):
        nll, n = heldout_nll(model, ids, p.seq_len)
        report["registers"][register] = perplexity_report(nll, n, n_bytes)
        total_nll, total_tok, total_bytes = total_nll + nll, total_tok + n, total_bytes + n_bytes
    report.update(perplexity_report(total_nll, total_tok, total_bytes))
    return model, log, report


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("name", help="selection name (curated or random)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pool", default="data/pool/pool.parquet")
    ap.add_argument("--dev", default="data/pool/dev.parquet")
    ap.add_argument("--tokenizer", default="models/tokenizer")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(PretrainParams, "pretrain", args.params)
    seed = load_base(args.params).seed
    budget = int(read_params_file(args.params)["curate"]["budget_tokens"])
    torch.set_num_threads(p.threads)
    tok = load_tokenizer(args.tokenizer)
    selection = read_json(f"data/curate/{args.name}/selection.json")["ids"]
    texts = {r["id"]: r["text"] for r in read_table(args.pool)}
    docs_ids = [tok(texts[i], add_special_tokens=False)["input_ids"] for i in selection]
    dev = defaultdict(lambda: ([], 0))
    for r in read_table(args.dev):
        ids, n_bytes = dev[r["register"]]
        dev[r["register"]] = (ids + [tok(r["text"], add_special_tokens=False)["input_ids"]],
                              n_bytes + len(r["text"].encode("utf-8")))

    model, log, report = train_and_eval(docs_ids, dev, tok, p, budget, seed, f"pretrain {args.name}")
    metrics = {"heldout": report, "params": count_params(model), "train": {
        "tokens": budget, "steps": len(log), "final_loss": log[-1]["loss"],
        "tokens_per_second": round(log[-1]["tokens"] / max(log[-1]["seconds"], 1e-9), 1)}}
    n_noise = p.noise_reorderings if args.name == p.noise_selection else 0
    if n_noise:
        ppls = [report["ppl"]]
        for k in range(n_noise):
            order = make_rng(seed, "reorder", k).permutation(len(docs_ids))
            info("pretrain", f"noise floor: re-ordering {k + 1}/{n_noise}")
            _, _, r = train_and_eval([docs_ids[i] for i in order], dev, tok, p, budget, seed, f"reorder {k + 1}")
            ppls.append(r["ppl"])
        metrics["noise"] = {"ppls": ppls, "ppl_halfrange": round((max(ppls) - min(ppls)) / 2, 4),
                            "ppl_std": round(float(np.std(ppls)), 4)}
    with atomic_dir(f"models/pretrain/{args.name}") as tmp:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
    write_json(f"plots/pretrain/{args.name}_loss.json", [{"step": r["step"], "loss": r["loss"]} for r in log])
    write_json(f"metrics/pretrain/{args.name}.json", metrics)
    summary(f"pretrain@{args.name}", started, heldout_ppl=report["ppl"], bpb=report["bpb"],
            noise_halfrange=metrics.get("noise", {}).get("ppl_halfrange", "-"))


if __name__ == "__main__":
    raise SystemExit(main())
