"""Stage `base_model`: the decision model's starting point.

Default profile: the small GPT pretrained on the curated selection
(`pretrain@curated`), so a change in curation re-runs the decision chain.
GPU profile: any local Hugging Face model directory (`source: path`).
Either way it reports the NLL of the solver's gold traces on held-out
questions, beside the same architecture untrained: pretraining must make the
base a better starting point.
"""
from __future__ import annotations

import argparse
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.io import atomic_dir, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_base, load_section, rule
from decision_pipeline.decision.prompts import encode, thinking_prefix
from decision_pipeline.decision.questions import LABELS, THINK_CLOSE, gold_index, load_items
from decision_pipeline.lm.model import load_model
from decision_pipeline.lm.readout import continuation_nll
from decision_pipeline.lm.bpe import load_tokenizer


@dataclass
class BaseModelParams:
    source: str = rule(choices=("pretrain", "path"))
    nll_items: int = rule(min=1)  # held-out eval questions used for the gold-trace NLL
    path: str = ""                # local HF model directory when source == path
    threads: int = rule(min=1, default=2)


def gold_trace_nll(model, tok, questions: list[dict]) -> float:
    """Mean per-token NLL of `trace </think> Answer: X<|im_end|>` after the thinking prefix."""
    prefixes = [thinking_prefix(tok, q) for q in questions]
    conts = [encode(tok, f"{q['trace']}\n{THINK_CLOSE}\nAnswer: {LABELS[gold_index(q)]}{tok.eos_token}")
             for q in questions]
    total, n = continuation_nll(model, prefixes, conts, tok.pad_token_id)
    return round(total / max(n, 1), 6)


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pretrained", default="models/pretrain/curated")
    ap.add_argument("--items", default="data/items/items.parquet")
    ap.add_argument("--out", default="models/base")
    ap.add_argument("--metrics", default="metrics/base_model.json")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(BaseModelParams, "base_model", args.params)
    seed = load_base(args.params).seed
    torch.set_num_threads(p.threads)
    source = Path(args.pretrained if p.source == "pretrain" else p.path)
    if not (source / "config.json").is_file():
        raise PipelineError(f"{source}: model directory not found (base_model.source={p.source}); fix base_model.path in params.yaml")
    model, tok = load_model(source), load_tokenizer(source)
    questions = stable_subset(load_items(args.items, split="eval"), p.nll_items, "gold_trace_nll")
    nll = gold_trace_nll(model, tok, questions)
    # the same architecture, freshly initialised, is the "untrained" reference
    torch.manual_seed(seed)
    untrained = type(model)(model.config).eval()
    nll_untrained = gold_trace_nll(untrained, tok, questions)
    with atomic_dir(args.out) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)
    metrics = {"source": str(source), "gold_trace_nll": nll, "gold_trace_nll_untrained": nll_untrained,
               "n_items": len(questions), "params": sum(x.numel() for x in model.parameters())}
    write_json(args.metrics, metrics)
    summary("base_model", started, gold_trace_nll=nll, untrained=nll_untrained)


if __name__ == "__main__":
    raise SystemExit(main())
