"""What the decision pipeline needs from a tokenizer it did not train, checked before any work.

The pipeline's own BPE has all of it by construction; a real model's tokenizer may not:

- `<think>` and `</think>` must each be one token: the post-chain readout cuts the sampled
  ids at the `</think>` id and GRPO counts a chain without it as unfinished, so a split
  `</think>` makes *every* chain unfinished (SmolLM2 has neither token);
- each option label as the prompts use it (" A" after `Answer:`, "A" at a line start)
  must be one token: the readout reads one logit per label;
- a pad token must exist: batches are padded (Llama-3 and the GGUF-converted SmolLM2 have
  none). `bpe.ensure_pad_token` (run by `load_tokenizer`) supplies the usual fallback;
- a teacher that exchanges token ids with the base (post-chain readout over the teacher's
  ids, vLLM `return_token_ids`) must use the same tokenizer: same size, same ids for probes.

Each check returns a list of one-line problems (empty = fine), so a preflight can list all
of them at once; `add_think_tokens` is the documented fix for the first one.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from tokenizers import AddedToken
from transformers import PreTrainedTokenizerBase

from decision_pipeline.questions.schema import LABELS, THINK_CLOSE, THINK_OPEN, label_tokens
from decision_pipeline.lm.bpe import ensure_pad_token  # noqa: F401 - the pad fallback lives where tokenizers load

# Texts the teacher and the base must cut into the same ids (chat markup, think markup, labels, prose)
PROBES = ("<|im_start|>user\nWhich is larger?\n\nA) 3\nB) 7<|im_end|>\n", f"{THINK_OPEN}\n7 > 3.\n{THINK_CLOSE}\n",
          "Answer: B", " The quick brown fox jumps over 12 lazy dogs.")


def default_labels(n_options: int = len(LABELS)) -> list[str]:
    """The label texts the prompts use: " A" after `Answer:` and "A" opening an option line."""
    return label_tokens(n_options) + list(LABELS[:n_options])


def _ids(tok: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def check_tokenizer(tok: PreTrainedTokenizerBase, labels: Sequence[str] | None = None) -> list[str]:
    """Problems that would silently break readout, chains or batching; empty when the tokenizer is usable."""
    problems = []
    for text in (THINK_OPEN, THINK_CLOSE):
        ids = _ids(tok, text)
        if len(ids) != 1:
            problems.append(f"{text!r} is {len(ids)} tokens {ids}, not one: every chain would count as unfinished; "
                            "set base_model.add_think_tokens: true (adds it as a whole token)")
    for text in labels if labels is not None else default_labels():
        ids = _ids(tok, text)
        if len(ids) != 1:
            problems.append(f"option label {text!r} is {len(ids)} tokens {ids}, not one: the readout needs one "
                            "logit per label; use a base model whose tokenizer keeps single letters whole")
    if tok.pad_token_id is None:
        problems.append("no pad token and no fallback (no eos, no <|im_end|>): set pad_token in the model's "
                        "tokenizer_config.json")
    return problems


def add_think_tokens(model, tok: PreTrainedTokenizerBase) -> list[str]:
    """Add `<think>`/`</think>` as whole (added, never split) tokens where they are not single tokens, and
    grow the model's embeddings to match (new rows start at the mean embedding). Returns the tokens added.

    They are added the way Qwen3 and the pipeline's own BPE have them: `AddedToken(special=False)`.
    A *special* token is dropped by every `skip_special_tokens=True` decode — vLLM's default and
    TRL's completion decode — so the chain text would lose its `</think>` and never parse.
    """
    missing = [t for t in (THINK_OPEN, THINK_CLOSE) if len(_ids(tok, t)) != 1]
    if missing:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in missing])
        if model is not None and model.get_input_embeddings().weight.shape[0] < len(tok):
            model.resize_token_embeddings(len(tok))
    return missing


def compare_tokenizers(base: PreTrainedTokenizerBase, other_size: int | None,
                       other_encode: Callable[[str], list[int]], name: str = "teacher") -> list[str]:
    """Problems when `other` (size, encoder) would exchange ids with `base` but cuts text differently.

    `other_size` None skips the size test (an endpoint that does not report it); the probes
    cover chat markup, think markup, labels and prose.
    """
    problems = []
    if other_size is not None and other_size != len(base):
        problems.append(f"{name} tokenizer has {other_size} tokens, the base {len(base)}: they exchange token ids, "
                        "so serve the base model's tokenizer with the teacher (or a teacher of the same family)")
    for probe in PROBES:
        mine, theirs = _ids(base, probe), list(other_encode(probe))
        if mine != theirs:
            problems.append(f"{name} tokenizer encodes {probe!r} as {theirs[:8]}… but the base as {mine[:8]}…: "
                            "serve a teacher with the base model's tokenizer")
            break
    return problems


def endpoint_encoder(base_url: str, model: str, timeout_s: float = 5.0) -> Callable[[str], list[int]]:
    """Text -> ids as an OpenAI-compatible server's tokenizer cuts it (vLLM's `POST /tokenize` at the server
    root, beside /v1); a server without that route raises a PipelineError naming it."""
    from decision_pipeline.common.errors import PipelineError
    root = base_url.rstrip("/").removesuffix("/v1")

    def encode(text: str) -> list[int]:
        body = json.dumps({"model": model, "prompt": text, "add_special_tokens": False}).encode()
        request = urllib.request.Request(f"{root}/tokenize", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                return [int(t) for t in json.loads(resp.read())["tokens"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PipelineError(f"{root}/tokenize did not return tokens ({type(exc).__name__}: {exc}); the teacher "
                                "must expose vLLM's /tokenize so its tokenizer can be compared with the base's") from None
    return encode


def teacher_tokenizer_problems(base: PreTrainedTokenizerBase, base_url: str, model: str,
                               key: str = "generate.teacher_base_url") -> list[str]:
    """For the preflight: one line per reason the teacher at `base_url` cannot exchange ids with `base`
    (an unreachable /tokenize is itself a problem line, not an exception), each naming `key`."""
    from decision_pipeline.common.errors import PipelineError
    try:
        problems = compare_tokenizers(base, None, endpoint_encoder(base_url, model))
    except PipelineError as exc:
        problems = [str(exc)]
    return [f"{key}: {p}" for p in problems]
