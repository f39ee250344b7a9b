"""The device smoke's CPU form: the same code at tiny shapes, every phase runs and prints its line."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_smoke_tiny_on_cpu():
    run = subprocess.run(["scripts/gpu_smoke.sh", "--tiny", "--steps", "2", "--rollout-tokens", "8"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {line.split("  ")[0].strip(): line.split() for line in run.stdout.splitlines()[2:]}
    assert set(rows) == {"readout", "post-chain readout", "sft", "grpo rollout (hf)", "grpo"}
    # tokens processed, by hand: readout 64 x 32; post-chain 2 x (32 + 96); sft 2 steps x 2 x 96;
    # rollout 2 x 8; grpo 2 steps x 2 x (32 + 64)
    assert [int(rows[s][-2]) for s in ("readout", "post-chain readout", "sft", "grpo rollout (hf)", "grpo")] == \
        [2048, 256, 384, 16, 384]


def test_gpu_smoke_without_gpu_refuses():
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the refusal cannot be shown")
    run = subprocess.run(["scripts/gpu_smoke.sh"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 2 and "sees no GPU" in run.stderr and "--tiny" in run.stderr
