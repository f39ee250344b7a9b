#!/usr/bin/env bash
# Device smoke (docs/gpu.md): a Qwen3-4B-shaped model with random bf16 weights through the pipeline's readout
# and the real trainers' steps (JointSFTTrainer's loss for SFT, TRL's GRPOTrainer for GRPO) at the GPU
# profile's sizes; prints measured peak GiB beside the memory plan's. Needs a CUDA torch, transformers,
# peft, trl, datasets and accelerate (no vLLM, no hub). About 1-2 minutes on one H200 (budget: 8).
# `--shapes heldout` measures the held-out rows of tests/fixtures/h200_memory.json; `scripts/gpu_smoke.sh --tiny` runs the same code on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PIPELINE_QUIET="${PIPELINE_QUIET:-1}" TRL_EXPERIMENTAL_SILENCE=1
exec timeout "${SMOKE_TIMEOUT_S:-480}" "$PY" -m decision_pipeline smoke "$@"
