"""A byte-level BPE tokenizer trained on pipeline text, saved as a HF fast tokenizer.

Why Qwen's exact splitting rules: transformers 5.x rebuilds any `qwen2`
tokenizer with NFC + Qwen's split regex + ByteLevel(use_regex=False) on reload
and ignores the saved pre-tokenizer, so a BPE trained any other way silently
changes ids after `AutoTokenizer.from_pretrained`. Training with the same rules
makes saved and reloaded ids identical (a test checks it).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.questions.schema import LABELS, assistant_answer, gold_index, user_message
from decision_pipeline.lm.params import TokenizerParams  # re-exported: params live apart from transformers

QWEN_SPLIT_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SPECIAL_TOKENS = [PAD, IM_START, IM_END]
MARKUP_TOKENS = [THINK_OPEN, THINK_CLOSE]





# ChatML with {% generation %} around assistant turns, so TRL's
# assistant_only_loss can mask everything but what the model must produce.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{%- if message['role'] == 'assistant' -%}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{%- else -%}{{ message['content'] + '<|im_end|>' }}{%- endif -%}"
    "{{ '\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)


def qwen_pipeline(tok: Tokenizer) -> Tokenizer:
    """Attach Qwen2's normaliser, pre-tokenizer and decoder to a tokenizer."""
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int, required_tokens: Iterable[str],
              min_frequency: int) -> Tokenizer:
    """Train a byte-level BPE; `required_tokens` (e.g. " A") must each end as one id."""
    tok = qwen_pipeline(Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False)))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    for text in required_tokens:
        if len(tok.encode(text, add_special_tokens=False).ids) != 1:
            raise PipelineError(f"tokenizer: {text!r} is not a single token; raise tokenizer.vocab_size or add it to the corpus")
    return tok


def wrap_fast(tok: Tokenizer, model_max_length: int) -> PreTrainedTokenizerFast:
    """A transformers fast tokenizer with ChatML special tokens and the chat template."""
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=PAD, unk_token=PAD,
        model_max_length=model_max_length, padding_side="left",
        additional_special_tokens=[IM_START])
    fast.chat_template = CHAT_TEMPLATE
    return fast


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """Load a saved tokenizer directory; a missing one is a clear error."""
    path = Path(path)
    if not path.is_dir():
        raise PipelineError(f"{path}: tokenizer/model directory not found; run `dvc repro` or fix the path in params.yaml")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise PipelineError(f"{path}: no tokenizer files ({', '.join(TOKENIZER_FILES)}); save the tokenizer "
                            "with the model (transformers would silently build an empty one)")
    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:  # noqa: BLE001 - no tokenizer files, unreadable ones, or a config.json/tokenizer_config.json
        # field of the wrong type (transformers and tokenizers raise many types for those): the directory's fault
        reason = " ".join(str(exc).split())[:160]
        raise PipelineError(f"{path}: no usable tokenizer here ({reason}); save one with the model") from None
    tok.padding_side = "left"
    ensure_pad_token(tok)
    check_fits_model(tok, path)
    return tok


def ensure_pad_token(tok: PreTrainedTokenizerBase) -> str | None:
    """Give a tokenizer without a pad token the usual fallback; returns the token chosen (None: had one
    or none fits — `tokenizer_checks.check_tokenizer` then reports it).

    ChatML models pad with `<|im_end|>` (it ends every turn, so padding never reads as a new one);
    others (Llama-3 has no pad) with eos. Padding is masked everywhere, so logits do not change.
    """
    if tok.pad_token_id is not None:
        return None
    chatml = IM_END in tok.get_vocab() and IM_START in (getattr(tok, "chat_template", None) or "")
    choice = IM_END if chatml else tok.eos_token
    if choice is None:
        return None
    tok.pad_token = choice
    return choice


def check_fits_model(tok: PreTrainedTokenizerBase, path: Path) -> None:
    """In a model directory, the tokenizer must not have more tokens than the model has embedding rows:
    another model's tokenizer copied in would otherwise crash deep inside the first forward pass."""
    config = path / "config.json"
    if not config.is_file():
        return  # a tokenizer-only directory (models/tokenizer)
    try:
        rows = json.loads(config.read_text(encoding="utf-8")).get("vocab_size")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise PipelineError(f"{config}: not valid JSON; re-save the model directory") from None
    if isinstance(rows, int) and len(tok) > rows:
        raise PipelineError(f"{path}: the tokenizer has {len(tok)} tokens but the model's vocab_size is {rows} "
                            "(config.json); it belongs to another model: save the model's own tokenizer there")


def render_chat(messages: list[dict], add_generation_prompt: bool = False) -> str:
    """The chat template's text without a tokenizer (for building the tokenizer's own corpus).

    A test checks it equals `apply_chat_template(..., tokenize=False)`.
    """
    text = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def question_chats(questions: list[dict]) -> list[str]:
    """Each question as a readout chat and as a thinking chat with its solver trace."""
    out = []
    for q in questions:
        label = LABELS[gold_index(q)]
        user = {"role": "user", "content": user_message(q)}
        out.append(render_chat([user, {"role": "assistant", "content": assistant_answer(q, label)}]))
        out.append(render_chat([user, {"role": "assistant", "content": assistant_answer(q, label, q["trace"])}]))
    return out


def train_pipeline_tokenizer(docs: list[str], questions: list[dict],
                             p: TokenizerParams) -> tuple[PreTrainedTokenizerFast, dict]:
    """The pipeline's tokenizer and its metrics, trained on pool documents and training-split chats.

    Every label after "Answer:" must be one token, also for option counts the
    families do not use, so a legend line of all labels is added ten times.
    """
    legend = [" ".join(f"Answer: {c}" for c in LABELS)] * 10
    corpus = docs + question_chats(questions) + legend
    tok = train_bpe(corpus, p.vocab_size, required_tokens=[f" {c}" for c in LABELS], min_frequency=p.min_frequency)
    fast = wrap_fast(tok, p.model_max_length)
    sample = corpus[: min(len(corpus), 2000)]
    n_tokens = sum(len(tok.encode(t).ids) for t in sample)
    n_chars = sum(len(t) for t in sample)
    return fast, {"vocab_size": len(fast), "corpus_docs": len(corpus), "chars_per_token": round(n_chars / n_tokens, 4)}
