"""params.yaml `runtime`: where models run and how much of the accelerator each engine may take.

Why a section of its own: the device, the readout's token budget and vLLM's share of the
card are properties of the machine, not of one stage; every stage that loads a model reads
them from here, so a GPU run cannot silently fall back to CPU fp32 (a CPU-only torch with
`device: cuda` is one clear error) and vLLM's memory share is a param, not a constant.
"""
from __future__ import annotations


import torch

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.params import DEVICES, RuntimeParams  # re-exported: params live apart from torch





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
