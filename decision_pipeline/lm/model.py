"""The tiny causal LM of the default profile (Qwen2 architecture from a config).

Why Qwen2: the GPU profile's base models are Qwen-family instruct models, so the
same code paths (chat template, LoRA target modules, vLLM) serve both profiles.
"""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, Qwen2Config, Qwen2ForCausalLM

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.params import TinyModelSpec  # re-exported: params live apart from torch




def build_tiny_model(spec: TinyModelSpec, vocab_size: int, pad_token_id: int, eos_token_id: int,
                     seed: int) -> Qwen2ForCausalLM:
    """Build a freshly initialised Qwen2 model; initialisation is seeded."""
    if spec.hidden_size % spec.num_heads:
        raise PipelineError(f"params.yaml: hidden_size {spec.hidden_size} must be divisible by num_heads {spec.num_heads}")
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers, num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads, max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True, pad_token_id=pad_token_id, eos_token_id=eos_token_id,
        bos_token_id=None, use_cache=True)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = pad_token_id
    model.generation_config.eos_token_id = eos_token_id
    return model


def load_model(path: str | Path, dtype: torch.dtype | None = None, device: str = "auto") -> PreTrainedModel:
    """Load a `save_pretrained` directory (local only: nothing is fetched from a hub).

    `device` is `runtime.device`: auto = CUDA when torch sees a GPU, else CPU; cuda on a
    CPU-only torch is one line naming the fix (never a silent fp32 CPU run of a GPU profile).
    On CUDA the model loads in bfloat16; on CPU it stays float32. The weight files are checked against
    config.json first (`lm.weights.check_weights`: headers only, no weights read).
    """
    from decision_pipeline.lm.runtime import model_dtype, resolve_device
    from decision_pipeline.lm.weights import check_weights

    path = Path(path)
    if not (path / "config.json").is_file():
        raise PipelineError(f"{path}: not a model directory (no config.json); run `dvc repro` or fix the model path in params.yaml")
    check_weights(path)  # missing, truncated or mismatched weights: one line here, not a safetensors traceback
    target = resolve_device(device)
    dtype = dtype or model_dtype(target)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, local_files_only=True)
    if target.type != "cpu":
        model.to(target)
    model.eval()
    return model


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
