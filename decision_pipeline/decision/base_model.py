"""The decision model's starting point and how good a start it is (stage `base_model`).

Default profile: the small GPT pretrained on the curated selection; GPU
profile: a local Hugging Face model directory. Either way the base is scored by
the NLL of the solver's gold traces on held-out questions, beside the same
architecture untrained: pretraining must make it a better starting point.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.common.params import rule
from decision_pipeline.decision.prompts import encode, thinking_prefix
from decision_pipeline.decision.questions import LABELS, THINK_CLOSE, gold_index
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.lm.model import count_params, load_model
from decision_pipeline.lm.readout import continuation_nll


@dataclass
class BaseModelParams:
    """Where the base model comes from and how many questions score it."""
    source: str = rule(choices=("pretrain", "path"), doc="pretrain: the pretrain@curated model; path: `path`")
    nll_items: int = rule(min=1, doc="held-out eval questions used for the gold-trace NLL")
    path: str = rule(doc="local Hugging Face model directory when source is path (a dep of the stage); "
                         "configs/external/none = none")
    threads: int = rule(min=1, doc="torch CPU threads")


def base_source(p: BaseModelParams, pretrained: str | Path) -> Path:
    """The model directory the params select; a missing one is a PipelineError naming the key."""
    if p.source == "path" and not p.path:
        raise PipelineError("params.yaml: base_model.path names no model (source: path); set it to a local "
                            "Hugging Face model directory or use source: pretrain")
    source = Path(pretrained if p.source == "pretrain" else p.path)
    if not (source / "config.json").is_file():
        raise PipelineError(f"{source}: model directory not found (base_model.source={p.source}); "
                            "fix base_model.path in params.yaml")
    return source


def gold_trace_nll(model: PreTrainedModel, tok: PreTrainedTokenizerBase, questions: list[dict]) -> float:
    """Mean per-token NLL of `trace </think> Answer: X<|im_end|>` after the thinking prefix."""
    prefixes = [thinking_prefix(tok, q) for q in questions]
    conts = [encode(tok, f"{q['trace']}\n{THINK_CLOSE}\nAnswer: {LABELS[gold_index(q)]}{tok.eos_token}")
             for q in questions]
    total, n = continuation_nll(model, prefixes, conts, tok.pad_token_id)
    return round(total / max(n, 1), 6)


def untrained_like(model: PreTrainedModel, seed: int) -> PreTrainedModel:
    """The same architecture freshly initialised (seeded): the "untrained" reference.

    Built in the trained model's dtype and on its device: `type(model)(config)` alone is fp32 on
    the CPU (16 GB for a 4B model, then 1,000 items forwarded on the CPU beside a GPU)."""
    torch.manual_seed(seed)
    param = next(model.parameters())
    previous = torch.get_default_dtype()
    torch.set_default_dtype(param.dtype)
    try:
        with torch.device(param.device):
            fresh = type(model)(model.config)
    finally:
        torch.set_default_dtype(previous)
    return fresh.eval()


def assess_base(source: Path, eval_questions: list[dict], p: BaseModelParams, seed: int,
                device: str = "auto") -> dict:
    """Metrics of the base at `source`: gold-trace NLL on a stable subset of eval questions, vs untrained.

    `device` is `runtime.device`; the untrained reference follows the model's dtype and device."""
    model, tok = load_model(source, device=device), load_tokenizer(source)
    questions = stable_subset(eval_questions, p.nll_items, "gold_trace_nll")
    nll = gold_trace_nll(model, tok, questions)
    nll_untrained = gold_trace_nll(untrained_like(model, seed), tok, questions)
    return {"source": str(source), "gold_trace_nll": nll, "gold_trace_nll_untrained": nll_untrained,
            "n_items": len(questions), "params": count_params(model)}
