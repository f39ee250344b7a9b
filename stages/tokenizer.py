"""Stage `tokenizer`: train the byte-level BPE of the default profile on pipeline text.

Corpus: the document pool plus the training-split questions rendered as chats
(so the chat markup and `Answer: X` label tokens are learned). Held-out dev
documents and eval questions are never seen.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from decision_pipeline.common.io import atomic_dir, read_table, write_json
from decision_pipeline.common.log import stage_main, summary
from decision_pipeline.common.params import load_section, rule
from decision_pipeline.decision.questions import LABELS, assistant_answer, gold_index, load_items, user_message
from decision_pipeline.lm.bpe import render_chat, train_bpe, wrap_fast


@dataclass
class TokenizerParams:
    vocab_size: int = rule(min=300, max=65535)
    min_frequency: int = rule(min=1)
    model_max_length: int = rule(min=64)


def question_chats(questions: list[dict]) -> list[str]:
    """Each question as a readout chat and as a thinking chat with its solver trace."""
    out = []
    for q in questions:
        label = LABELS[gold_index(q)]
        user = {"role": "user", "content": user_message(q)}
        out.append(render_chat([user, {"role": "assistant", "content": assistant_answer(q, label)}]))
        out.append(render_chat([user, {"role": "assistant", "content": assistant_answer(q, label, q["trace"])}]))
    return out


@stage_main
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pool", default="data/pool/pool.parquet")
    ap.add_argument("--items", default="data/items/items.parquet")
    ap.add_argument("--out", default="models/tokenizer")
    ap.add_argument("--metrics", default="metrics/tokenizer.json")
    args = ap.parse_args(argv)
    started = time.time()
    p = load_section(TokenizerParams, "tokenizer", args.params)
    docs = [r["text"] for r in read_table(args.pool)]
    chats = question_chats(load_items(args.items, split="pool"))
    # every label after "Answer:" must be one token, also for option counts the families do not use
    legend = [" ".join(f"Answer: {c}" for c in LABELS)] * 10
    corpus = docs + chats + legend
    tok = train_bpe(corpus, p.vocab_size, required_tokens=[f" {c}" for c in LABELS], min_frequency=p.min_frequency)
    fast = wrap_fast(tok, p.model_max_length)
    with atomic_dir(args.out) as tmp:
        fast.save_pretrained(str(tmp))
    sample = corpus[: min(len(corpus), 2000)]
    n_tokens = sum(len(tok.encode(t).ids) for t in sample)
    n_chars = sum(len(t) for t in sample)
    metrics = {"vocab_size": len(fast), "corpus_docs": len(corpus), "chars_per_token": round(n_chars / n_tokens, 4)}
    write_json(args.metrics, metrics)
    summary("tokenizer", started, **metrics)


if __name__ == "__main__":
    raise SystemExit(main())
