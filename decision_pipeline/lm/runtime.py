"""params.yaml `runtime`: where models run and how much of the accelerator each engine may take.

Why a section of its own: the device, the readout's token budget and vLLM's share of the
card are properties of the machine, not of one stage; every stage that loads a model reads
them from here, so a GPU run cannot silently fall back to CPU fp32 (a CPU-only torch with
`device: cuda` is one clear error) and vLLM's memory share is a param, not a constant.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule

DEVICES = ("auto", "cpu", "cuda")


@dataclass
class RuntimeParams:
    """params.yaml `runtime`: the device models load on and the memory knobs of the engines."""
    device: str = rule(choices=DEVICES, default="auto",
                       doc="auto = cuda when torch sees a GPU, else cpu; cuda on a CPU-only torch is an error")
    readout_batch_tokens: int = rule(min=1, default=8192,
                                     doc="readout batches are packed by tokens (rows x longest padded length)")
    vllm_gpu_memory_utilization: float = rule(gt=0.0, max=1.0, default=0.85,
                                              doc="share of the GPU's memory a vLLM generation engine may take")
    vllm_max_model_len: int = rule(min=0, default=0,
                                   doc="vLLM context length (prompt + completion); 0 = the model's own")
    hf_decode: str = rule(choices=("eager", "static_cudagraphs", "static_inductor"), default="eager",
                          doc="hf backend decoding: eager, or a static KV cache with a compiled forward replayed "
                              "as CUDA graphs (static_cudagraphs: seconds to compile; static_inductor: inductor "
                              "kernels, minutes); greedy tokens equal eager's (docs/gpu.md)")


def resolve_device(device: str = "auto") -> torch.device:
    """The torch device for `runtime.device`; cuda without a CUDA torch is one line naming the fix."""
    if device not in DEVICES:
        raise PipelineError(f"params.yaml: runtime.device {device!r} is not one of {', '.join(DEVICES)}")
    if device == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if device == "cuda":
        build = torch.__version__ + ("" if torch.version.cuda else " (a CPU-only build)")
        raise PipelineError(f"params.yaml: runtime.device is cuda but torch {build} sees no GPU; "
                            "install the CUDA torch with `make gpu-install` (or set runtime.device: auto or cpu)")
    return torch.device("cpu")


def model_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA (half the memory, the dtype the research ran), fp32 on CPU (the default profile's numbers)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def vllm_engine_kwargs(p: RuntimeParams) -> dict:
    """The vLLM `LLM(...)` memory arguments from `runtime` (max_model_len None = the model's own)."""
    return {"gpu_memory_utilization": p.vllm_gpu_memory_utilization,
            "max_model_len": p.vllm_max_model_len or None}
