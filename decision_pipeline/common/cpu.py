"""The same float results on every x86 CPU: pin PyTorch's CPU kernels to AVX2.

Why: PyTorch picks its vectorised CPU kernels by what the CPU offers (AVX-512 here, AVX2 on the
machine a reviewer used), and MKL and oneDNN do the same. The kernels round differently, so the
first pretraining step already differs and a fresh clone's `make run` on another CPU changed 61
tracked files (issue 34). Measured here: 20 steps of the default tiny model give loss 1.81571078
with the native AVX-512 kernels and 1.81570840 with `ATEN_CPU_CAPABILITY=avx2`; MKL's conditional
numerical reproducibility (`MKL_CBWR=AVX2`) and oneDNN's ISA cap do the same for their kernels. AVX2
is the widest instruction set every x86-64 CPU of the last decade runs, so every such machine then
computes the same bytes. Set before the first tensor operation (importing this package does it);
a variable the user set wins; `PIPELINE_CPU_KERNELS=native` keeps the CPU's own choice.
"""
from __future__ import annotations

import os
import platform

PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return False


def pin_cpu_kernels() -> dict[str, str]:
    """Set the pinning variables that are not set yet (x86-64 with AVX2 only); the ones now in force."""
    if os.environ.get("PIPELINE_CPU_KERNELS") == "native":
        return {}
    if platform.machine().lower() not in ("x86_64", "amd64") or not _has_avx2():
        return {}
    for key, value in PINNED.items():
        os.environ.setdefault(key, value)
    return {k: os.environ[k] for k in PINNED}
