"""`make gpu-install`'s last step: fail loudly when the CPU torch stayed or vLLM is not the pinned one.

Why a separate check: pip reports success when the CPU build already satisfies a bare version pin,
and the pipeline then runs a 4B model on CPU in fp32 without a word.
"""
from __future__ import annotations

import importlib.metadata
import sys

from decision_pipeline.preflight.checks import TORCH_VERSION, VLLM_VERSION


def problems() -> list[str]:
    """One line per way this environment is not the GPU extra."""
    import torch
    out = []
    if not torch.__version__.startswith(TORCH_VERSION):
        out.append(f"torch: {torch.__version__} installed, the GPU extra pins {TORCH_VERSION}; rerun `make gpu-install`")
    if not torch.version.cuda:
        out.append(f"torch: {torch.__version__} is the CPU build (the CPU wheel stayed); run `.venv/bin/pip install "
                   "--force-reinstall --no-deps torch==2.13.0+cu129 --index-url https://download.pytorch.org/whl/cu129`")
    elif not torch.cuda.is_available():
        out.append(f"torch: {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU; check `nvidia-smi` and that "
                   "the driver supports this CUDA version")
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        version = "not installed"
    if version != VLLM_VERSION:
        out.append(f"vllm: {version}, the GPU extra pins {VLLM_VERSION}; rerun `make gpu-install`")
    return out


def main(argv: list[str] | None = None) -> int:
    """No options: `argv` is accepted (and ignored) as every verb of `python -m decision_pipeline` passes one."""
    errs = problems()
    for line in errs:
        print(line, file=sys.stderr)
    if errs:
        return 2
    import torch
    print(f"gpu-install: ok: torch {torch.__version__} on {torch.cuda.get_device_name(0)}, vllm {VLLM_VERSION}")
    return 0

