"""Importing the library pins PyTorch's CPU kernels to AVX2 (common/cpu.py), unless told not to."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from decision_pipeline.common.cpu import _has_avx2

PROBE = ("import torch, decision_pipeline.common; torch.randn(8, 8) @ torch.randn(8, 8); "
         "print(torch.backends.cpu.get_cpu_capability())")


def _capability(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "PIPELINE_CPU_KERNELS")}
    proc = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip()


@pytest.mark.skipif(not _has_avx2(), reason="pinning applies to x86-64 CPUs with AVX2 only")
def test_kernels_pinned_to_avx2_and_the_escape_hatch_works():
    assert _capability() == "AVX2"
    assert _capability(ATEN_CPU_CAPABILITY="default") == "DEFAULT"     # a user's own setting wins
    native = _capability(PIPELINE_CPU_KERNELS="native")
    assert native in ("AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX")
