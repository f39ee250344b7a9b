"""Token-id prompts for the three ways a model answers a question.

- readout:   user turn, then the assistant turn opened with `Answer:`; the next
             token's label logits are the fast ("system one") answer;
- thinking:  the assistant turn opened with `<think>`; the model writes a chain,
             closes it and answers;
- post-chain: the thinking prefix + the chain's exact sampled ids up to
             `</think>`, then `\nAnswer:` — the readout after thinking.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # a type only: checking params must not import transformers
    from transformers import PreTrainedTokenizerBase

from decision_pipeline.questions.schema import ANSWER_PREFIX, THINK_CLOSE, THINK_OPEN, label_tokens, user_message


def chat_prefix(tok: PreTrainedTokenizerBase, q: dict) -> str:
    return tok.apply_chat_template([{"role": "user", "content": user_message(q)}],
                                   tokenize=False, add_generation_prompt=True)


def encode(tok: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def readout_prefix(tok: PreTrainedTokenizerBase, q: dict) -> list[int]:
    return encode(tok, chat_prefix(tok, q) + ANSWER_PREFIX)


def thinking_prefix(tok: PreTrainedTokenizerBase, q: dict) -> list[int]:
    return encode(tok, chat_prefix(tok, q) + THINK_OPEN + "\n")


def label_ids(tok: PreTrainedTokenizerBase, n_options: int) -> list[int]:
    """Token id of each option label as it follows `Answer:` (each must be one token)."""
    ids = []
    for text in label_tokens(n_options):
        enc = encode(tok, text)
        if len(enc) != 1:
            raise ValueError(f"label {text!r} is {len(enc)} tokens; the tokenizer must keep labels whole")
        ids.append(enc[0])
    return ids


def chain_until_close(tok: PreTrainedTokenizerBase, chain_ids: Sequence[int]) -> list[int] | None:
    """The sampled ids up to and including `</think>`, or None if the chain never closed."""
    close = tok.convert_tokens_to_ids(THINK_CLOSE)
    chain_ids = list(chain_ids)
    return chain_ids[:chain_ids.index(close) + 1] if close in chain_ids else None


def post_chain_prefix(tok: PreTrainedTokenizerBase, thinking_ids: Sequence[int],
                      closed_chain_ids: Sequence[int]) -> list[int]:
    return list(thinking_ids) + list(closed_chain_ids) + encode(tok, "\n" + ANSWER_PREFIX)


def training_text(tok: PreTrainedTokenizerBase, q: dict, assistant: str) -> str:
    """A whole chat (user + assistant) as text, for tokenizer and LM training corpora."""
    return tok.apply_chat_template([{"role": "user", "content": user_message(q)},
                                    {"role": "assistant", "content": assistant}], tokenize=False)
