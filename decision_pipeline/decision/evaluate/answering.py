"""Evaluate a model on questions: fast readout, thinking, post-chain readout.

Per-item records are plain dicts (kept in a table for later stages); the
summary functions turn them into the metrics review relies on.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from decision_pipeline.common import stats
from decision_pipeline.decision.parsing import parse_answer
from decision_pipeline.decision.prompts import (chain_until_close, label_ids, post_chain_prefix, readout_prefix,
                                     thinking_prefix)
from decision_pipeline.questions.schema import THINK_OPEN, gold_index
from decision_pipeline.lm.backends import Backend, SamplingSettings, backend_for_model


from decision_pipeline.lm.readout import DEFAULT_BATCH_TOKENS, label_logits
from decision_pipeline.lm.runtime import RuntimeParams
from decision_pipeline.decision.evaluate.config import AnsweringParams


def readout(model: PreTrainedModel, tok: PreTrainedTokenizerBase, questions: Sequence[dict],
            batch_size: int = 32, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> list[np.ndarray]:
    """Option-label logits after `Answer:` for each question (ragged, input order); forward batches hold
    at most `batch_size` questions and `batch_tokens` padded tokens (`runtime.readout_batch_tokens`)."""
    prefixes = [readout_prefix(tok, q) for q in questions]
    labels = [label_ids(tok, len(q["options"])) for q in questions]
    return label_logits(model, prefixes, labels, tok.pad_token_id, batch_size, desc="readout",
                        batch_tokens=batch_tokens)


def thinking(backend: Backend, model: PreTrainedModel, tok: PreTrainedTokenizerBase,
             questions: Sequence[dict], settings: SamplingSettings, batch_size: int = 32,
             batch_tokens: int = DEFAULT_BATCH_TOKENS) -> list[dict]:
    """One sampled chain per question; parsed answer and the post-chain readout logits."""
    prefixes = [thinking_prefix(tok, q) for q in questions]
    completions = backend.generate(prefixes, settings)
    records, post_prefixes, post_labels, post_rows = [], [], [], []
    for c in completions:
        q = questions[c.prompt_index]
        closed = chain_until_close(tok, c.token_ids)
        records.append({"chain_tokens": len(c.token_ids), "finish_reason": c.finish_reason,
                        # parsed as the assistant turn (`<think>` is in the prompt): an unclosed chain is unparsed
                        "thinking_pred": parse_answer(f"{THINK_OPEN}\n{c.text}", len(q["options"])),
                        "closed": closed is not None, "text": c.text, "post_logits": None})
        if closed is not None:
            post_rows.append(len(records) - 1)
            post_prefixes.append(post_chain_prefix(tok, prefixes[c.prompt_index], closed))
            post_labels.append(label_ids(tok, len(q["options"])))
    if post_prefixes:
        logits = label_logits(model, post_prefixes, post_labels, tok.pad_token_id, batch_size, desc="post-chain",
                              batch_tokens=batch_tokens)
        for row, lg in zip(post_rows, logits):
            records[row]["post_logits"] = lg
    return records


def readout_summary(logits: Sequence[np.ndarray], questions: Sequence[dict], temps: dict | None = None,
                    n_bins: int = 10) -> dict:
    """Accuracy, NLL, Brier, ECE of the readout (optionally with per-task temperatures)."""
    temps = temps or {}
    probs = [stats.softmax_with_temperature(lg, temps.get(q["task"], 1.0)) for lg, q in zip(logits, questions)]
    gold = np.array([gold_index(q) for q in questions])
    pred = np.array([int(np.argmax(p)) for p in probs])
    conf = np.array([float(np.max(p)) for p in probs])
    return {"accuracy": round(stats.accuracy(pred, gold), 6), "nll": round(stats.nll(probs, gold), 6),
            "brier": round(stats.brier(probs, gold), 6),
            "ece": round(stats.ece(conf, pred == gold, n_bins), 6), "n": len(questions)}


def answer_both_ways(model: PreTrainedModel, tok: PreTrainedTokenizerBase, backend: Backend,
                     questions: Sequence[dict], settings: SamplingSettings,
                     batch_size: int = 32, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> tuple[list[np.ndarray], list[dict]]:
    """Readout logits and one thinking record (with post-chain logits) per question."""
    return (readout(model, tok, questions, batch_size, batch_tokens),
            thinking(backend, model, tok, questions, settings, batch_size, batch_tokens))


def answer_questions(model_dir: str, questions: Sequence[dict], p: AnsweringParams,
                     seed: int, runtime: RuntimeParams | None = None) -> tuple[list[np.ndarray], list[dict]]:
    """Load the model in `model_dir` and answer each question by readout and by one sampled chain.

    The readout runs before the generation engine is built: a vLLM engine takes its share of the
    GPU (`runtime.vllm_gpu_memory_utilization`) at construction and keeps it, so the readout's
    activations would have to fit beside it."""
    from decision_pipeline.lm.bpe import load_tokenizer
    from decision_pipeline.lm.model import load_model

    runtime = runtime or RuntimeParams()
    model, tok = load_model(model_dir, device=runtime.device), load_tokenizer(model_dir)
    logits = readout(model, tok, questions, p.batch_size, runtime.readout_batch_tokens)
    backend = backend_for_model(p.backend, model, tok, model_dir, p.batch_size, runtime)
    settings = SamplingSettings(max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
                                seed=seed, stop_token_ids=(tok.eos_token_id,))
    return logits, thinking(backend, model, tok, questions, settings, p.batch_size, runtime.readout_batch_tokens)
