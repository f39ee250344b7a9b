"""The decision model's starting point and how good a start it is (stage `base_model`).

Default profile: the small GPT pretrained on the curated selection; GPU
profile: a local Hugging Face model directory. Either way the base is scored by
the NLL of the solver's gold traces on held-out questions, beside the same
architecture untrained: pretraining must make it a better starting point.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import stable_subset
from decision_pipeline.decision.prompts import encode, thinking_prefix
from decision_pipeline.questions.schema import LABELS, THINK_CLOSE, gold_index
from decision_pipeline.lm.bpe import load_tokenizer
from decision_pipeline.lm.model import count_params, load_model
from decision_pipeline.lm.readout import continuation_nll
from decision_pipeline.lm.weights import check_weights
from decision_pipeline.decision.base.config import BaseModelParams




def base_source(p: BaseModelParams, pretrained: str | Path) -> Path:
    """The model directory the params select; a missing one, or one whose weight files are missing,
    truncated or of another config (`lm.weights`), is a PipelineError naming the key."""
    if p.source == "path" and not p.path:
        raise PipelineError("params.yaml: base_model.path names no model (source: path); set it to a local "
                            "Hugging Face model directory or use source: pretrain")
    source = Path(pretrained if p.source == "pretrain" else p.path)
    if not (source / "config.json").is_file():
        raise PipelineError(f"{source}: model directory not found (base_model.source={p.source}); "
                            "fix base_model.path in params.yaml")
    check_weights(source, "base_model.path" if p.source == "path" else None)  # before anything is copied
    return source


def _saved_pad(source: Path) -> bool:
    """Whether the directory's own tokenizer files name a pad token (else the fallback must be saved)."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        f = source / name
        if f.is_file() and json.loads(f.read_text(encoding="utf-8")).get("pad_token"):
            return True
    return False


@dataclass
class PreparedBase:
    """The base model's tokenizer, checked (and the model where tokens were added), ready to write."""
    tok: PreTrainedTokenizerBase
    model: PreTrainedModel | None
    added: list[str]
    padded: bool


def prepare_base(source: Path, add_think: bool) -> PreparedBase:
    """Check the base's tokenizer before anything is written (`tokenizer_checks.check_tokenizer`).

    A pad token is supplied where the usual fallback exists (`load_tokenizer`), `<think>`/`</think>`
    are added as whole tokens with grown embeddings when `add_think` asks for it, and any problem
    left is one PipelineError naming base_model.path and the fix.
    """
    from decision_pipeline.lm.tokenizer_checks import add_think_tokens, check_tokenizer

    tok = load_tokenizer(source)  # supplies the pad fallback (bpe.ensure_pad_token)
    padded = tok.pad_token is not None and not _saved_pad(source)
    model = load_model(source) if add_think else None
    added = add_think_tokens(model, tok) if add_think else []
    problems = check_tokenizer(tok)
    if problems:
        raise PipelineError(f"{source}: base_model.path's tokenizer: {problems[0]}"
                            + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    return PreparedBase(tok, model if added else None, added, padded)


def write_base(source: Path, dest: Path, prepared: PreparedBase) -> None:
    """The base as later stages read it: a copy of `source`, re-saved where tokens or a pad were added."""
    if prepared.model is not None:
        prepared.model.save_pretrained(dest)
        prepared.tok.save_pretrained(dest)
        return
    shutil.copytree(source, dest, dirs_exist_ok=True)
    if prepared.padded:
        prepared.tok.save_pretrained(dest)


def materialise_base(source: Path, dest: Path, add_think: bool) -> list[str]:
    """`prepare_base` then `write_base`; returns the tokens added."""
    prepared = prepare_base(source, add_think)
    write_base(source, dest, prepared)
    return prepared.added


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
