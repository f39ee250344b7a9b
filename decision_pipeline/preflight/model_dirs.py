"""Random-weight model directories from a config fixture, with a tokenizer the pipeline builds itself.

Why: the GPU checks (`make gpu-check`, scripts/gpu_smoke.sh, scripts/gpu_measure.sh) must run on any
CUDA machine with no hub and no weights. Memory and speed depend on a model's shapes, not its values,
so a directory with the published config (tests/fixtures/qwen3_4b, tests/fixtures/smollm2_135m) and
random weights exercises the real code at the real size. The tokenizer is the pipeline's own BPE
(ChatML, `<think>`/`</think>`, single-token labels) trained in a second on the questions' chats; the
model keeps the config's vocabulary (more embedding rows than tokens is allowed, never fewer).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.textfile import read_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
QWEN3_4B = FIXTURES / "qwen3_4b" / "config.json"
SMOLLM2_135M = FIXTURES / "smollm2_135m" / "config.json"
REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "model_type")
# a tiny decoder for the CPU variants (CI): same families and code paths, seconds instead of minutes
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 128, "vocab_size": 1024, "max_position_embeddings": 4096}


def read_config(path: str | Path, changes: dict | None = None) -> dict:
    """A config.json as a dict with `changes` laid over it; a missing key the checks need is one line."""
    path = Path(path)
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise PipelineError(f"{path}: config.json not found; pass a Hugging Face config.json (e.g. {QWEN3_4B})")
    try:
        config = json.loads(read_text(path))      # a BOM, UTF-16 or a non-UTF-8 byte: one line naming the file
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); fix or replace the file") from None
    if not isinstance(config, dict):
        raise PipelineError(f"{path}: holds a JSON {type(config).__name__}, not an object; "
                            "pass the model's Hugging Face config.json")
    config.update(changes or {})
    text = config.get("text_config", config)
    missing = [k for k in REQUIRED_KEYS if k not in text]
    if missing:
        raise PipelineError(f"{path}: key {missing[0]} missing; add it from the model's published config.json "
                            "(a decoder config needs " + ", ".join(REQUIRED_KEYS) + ")")
    return config


def build_tokenizer(seed: int = 0, vocab_size: int = 800):
    """The pipeline's BPE (Qwen2 splitting, ChatML, think tokens, single-token labels) on question chats
    and reasoning texts, as tests/conftest.py builds it (about a second)."""
    from decision_pipeline.questions.splits import build_questions
    from decision_pipeline.lm.bpe import question_chats, train_bpe, wrap_fast
    from decision_pipeline.questions.families import reasoning_text
    from decision_pipeline.questions.schema import LABELS

    questions = build_questions(["keyword", "category", "larger", "count"], [0, 1, 2, 3, 4], 4, seed)
    rng = random.Random(seed)
    corpus = question_chats(questions) + [reasoning_text(rng) for _ in range(300)]
    corpus += [" ".join(f"Answer: {c}" for c in LABELS)] * 10
    return wrap_fast(train_bpe(corpus, vocab_size, [f" {c}" for c in LABELS], min_frequency=2), 1 << 17)


def build_model(config: dict, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """A randomly initialised causal LM of `config` made directly on `device` (nothing read or fetched)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model(**{k: v for k, v in config.items() if k not in ("architectures", "torch_dtype",
                                                                                "dtype", "transformers_version")})
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval()


def write_model_dir(config: dict, out: Path, tok, dtype: torch.dtype = torch.float32, seed: int = 0) -> Path:
    """Save a random-weight model of `config` with `tok` beside it (pad/eos set from the tokenizer)."""
    if len(tok) > int(config["vocab_size"]):
        raise PipelineError(f"config vocab_size {config['vocab_size']} is smaller than the tokenizer ({len(tok)}); "
                            "raise vocab_size")
    ids = {"pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id, "bos_token_id": None}
    model = build_model({**config, **ids}, torch.device("cpu"), dtype, seed)
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = tok.pad_token_id, tok.eos_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out
