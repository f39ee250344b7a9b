"""Generation backends behind one interface.

`generate(prompt_ids, settings)` takes token-id prompts and returns one
`Completion` per prompt and sample, with token ids, text, finish reason and
timing. Implementations: `hf` (transformers), `vllm` (offline engine, optional
GPU extra), `openai` (any OpenAI-compatible completions endpoint). The
`solver` teacher is not a model and lives with the question families.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.params import BACKENDS  # re-exported: the params' choices live with the params


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: `temperature` 0 means greedy; `n` samples per prompt."""
    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    n: int = 1
    seed: int = 0
    stop_token_ids: tuple[int, ...] = ()


@dataclass
class Completion:
    """One sampled continuation; `finish_reason` is 'stop' (hit a stop token) or 'length'."""
    prompt_index: int
    sample_index: int
    token_ids: list[int]
    text: str
    finish_reason: str
    prompt_tokens: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    name: str

    def generate(self, prompt_ids: Sequence[Sequence[int]], settings: SamplingSettings) -> list[Completion]:
        ...



def make_backend(name: str, **kwargs: Any) -> Backend:
    """Build a backend by name; an unknown name is a clear error listing the known ones."""
    if name == "hf":
        from decision_pipeline.lm.backends.hf import HFBackend
        return HFBackend(**kwargs)
    if name == "vllm":
        from decision_pipeline.lm.backends.vllm import VLLMBackend
        return VLLMBackend(**kwargs)
    if name == "openai":
        from decision_pipeline.lm.backends.openai import OpenAIBackend
        return OpenAIBackend(**kwargs)
    raise PipelineError(f"backend {name!r} is unknown; use one of {', '.join(BACKENDS)} (params.yaml)")


def backend_for_model(name: str, model: Any, tokenizer: Any, model_dir: str, batch_size: int,
                      runtime: Any = None) -> Backend:
    """The backend that runs a local model: `hf` on the loaded model, `vllm` on its directory.

    `runtime` (RuntimeParams; None = its defaults) gives vLLM its share of the GPU and its context."""
    if name == "hf":
        return make_backend("hf", model=model, tokenizer=tokenizer, batch_size=batch_size,
                            decode=getattr(runtime, "hf_decode", "eager"))
    if name == "vllm":
        from decision_pipeline.lm.runtime import RuntimeParams, vllm_engine_kwargs
        return make_backend("vllm", model_path=model_dir, **vllm_engine_kwargs(runtime or RuntimeParams()))
    raise PipelineError(f"backend {name!r} cannot run a local model; use hf or vllm (openai serves a teacher or judge)")
